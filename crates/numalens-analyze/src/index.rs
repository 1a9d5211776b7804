//! Lookups the sample pass makes for every row, kept to an array index where possible.

use std::collections::HashMap;

use numalens_format::Object;

/// Object id → position in the objects table.
pub(crate) struct ObjectIndex {
    /// Indexed by object id when ids are dense (the recorder numbers objects from 0).
    direct: Vec<u32>,
    sparse: HashMap<u64, u32>,
}

const ABSENT: u32 = u32::MAX;

impl ObjectIndex {
    pub(crate) fn new(objects: &[Object]) -> Self {
        let max_id = objects.iter().map(|o| o.object_id).max().unwrap_or(0);
        let dense = max_id < 4 * objects.len() as u64 + 1024;
        let mut index = ObjectIndex {
            direct: Vec::new(),
            sparse: HashMap::new(),
        };
        if dense {
            index.direct = vec![ABSENT; max_id as usize + 1];
        }
        for (position, object) in objects.iter().enumerate() {
            let position = position as u32;
            if dense {
                index.direct[object.object_id as usize] = position;
            } else {
                index.sparse.insert(object.object_id, position);
            }
        }
        index
    }

    #[inline]
    pub(crate) fn get(&self, object_id: u64) -> Option<u32> {
        if self.direct.is_empty() {
            return self.sparse.get(&object_id).copied();
        }
        match self.direct.get(object_id as usize) {
            Some(&p) if p != ABSENT => Some(p),
            _ => None,
        }
    }
}
