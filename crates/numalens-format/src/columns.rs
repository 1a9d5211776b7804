//! How a Rust field type becomes an Arrow column and back.

use std::path::Path;
use std::sync::Arc;

use arrow_array::types::{UInt8Type, UInt16Type, UInt32Type, UInt64Type};
use arrow_array::{Array, ArrayRef, DictionaryArray, PrimitiveArray, StringArray, UInt8Array};
use arrow_schema::DataType;

use crate::error::{FormatError, Result};

/// A field type that can be stored as one Arrow/Parquet column.
pub trait ColumnValue: Sized {
    fn data_type() -> DataType;
    fn nullable() -> bool {
        false
    }
    /// Builds the column from one value per row.
    fn build<'a>(values: impl ExactSizeIterator<Item = &'a Self>) -> ArrayRef
    where
        Self: 'a;
    /// Reads the column back; `path` and `column` name the place in errors.
    fn extract(array: &ArrayRef, path: &Path, column: &str) -> Result<Vec<Self>>;
    /// Values of a column that a profile of an older minor version does not have: missing
    /// values for an optional column, `None` (an error) for a required one.
    fn absent(_rows: usize) -> Option<Vec<Self>> {
        None
    }
}

pub(crate) fn column_error(path: &Path, column: &str, problem: impl Into<String>) -> FormatError {
    FormatError::Column {
        path: path.to_path_buf(),
        column: column.to_string(),
        problem: problem.into(),
    }
}

fn downcast<'a, T: 'static>(array: &'a ArrayRef, path: &Path, column: &str) -> Result<&'a T> {
    array.as_any().downcast_ref::<T>().ok_or_else(|| {
        let found = array.data_type();
        column_error(
            path,
            column,
            format!("has type {found}, not the type numalens writes"),
        )
    })
}

macro_rules! primitive_column {
    ($t:ty, $arrow:ty, $dt:expr) => {
        impl ColumnValue for $t {
            fn data_type() -> DataType {
                $dt
            }
            fn build<'a>(values: impl ExactSizeIterator<Item = &'a Self>) -> ArrayRef {
                Arc::new(PrimitiveArray::<$arrow>::from_iter_values(values.copied()))
            }
            fn extract(array: &ArrayRef, path: &Path, column: &str) -> Result<Vec<Self>> {
                let a = downcast::<PrimitiveArray<$arrow>>(array, path, column)?;
                if a.null_count() > 0 {
                    return Err(column_error(path, column, "has missing values but may not"));
                }
                Ok(a.values().to_vec())
            }
        }

        impl ColumnValue for Option<$t> {
            fn data_type() -> DataType {
                $dt
            }
            fn nullable() -> bool {
                true
            }
            fn build<'a>(values: impl ExactSizeIterator<Item = &'a Self>) -> ArrayRef {
                Arc::new(values.copied().collect::<PrimitiveArray<$arrow>>())
            }
            fn extract(array: &ArrayRef, path: &Path, column: &str) -> Result<Vec<Self>> {
                Ok(downcast::<PrimitiveArray<$arrow>>(array, path, column)?
                    .iter()
                    .collect())
            }
            fn absent(rows: usize) -> Option<Vec<Self>> {
                Some(vec![None; rows])
            }
        }
    };
}

primitive_column!(u16, UInt16Type, DataType::UInt16);
primitive_column!(u32, UInt32Type, DataType::UInt32);
primitive_column!(u64, UInt64Type, DataType::UInt64);

impl ColumnValue for String {
    fn data_type() -> DataType {
        DataType::Utf8
    }
    fn build<'a>(values: impl ExactSizeIterator<Item = &'a Self>) -> ArrayRef {
        Arc::new(values.map(Some).collect::<StringArray>())
    }
    fn extract(array: &ArrayRef, path: &Path, column: &str) -> Result<Vec<Self>> {
        let a = downcast::<StringArray>(array, path, column)?;
        a.iter()
            .map(|v| v.map(str::to_string))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| column_error(path, column, "has missing values but may not"))
    }
}

impl ColumnValue for Option<String> {
    fn data_type() -> DataType {
        DataType::Utf8
    }
    fn nullable() -> bool {
        true
    }
    fn build<'a>(values: impl ExactSizeIterator<Item = &'a Self>) -> ArrayRef {
        Arc::new(values.map(|v| v.as_deref()).collect::<StringArray>())
    }
    fn extract(array: &ArrayRef, path: &Path, column: &str) -> Result<Vec<Self>> {
        let a = downcast::<StringArray>(array, path, column)?;
        Ok(a.iter().map(|v| v.map(str::to_string)).collect())
    }
    fn absent(rows: usize) -> Option<Vec<Self>> {
        Some(vec![None; rows])
    }
}

/// An enum stored as a dictionary-encoded string column, so that pandas, polars and DuckDB show
/// its labels (`"load"`, `"heap"`) while the file holds one small code per row.
pub trait Label: Copy + Sized + 'static {
    /// Labels in code order: `LABELS[code]`.
    const LABELS: &'static [&'static str];
    fn code(self) -> u8;
    fn from_code(code: u8) -> Self;

    fn label(self) -> &'static str {
        Self::LABELS[self.code() as usize]
    }
    fn from_label(text: &str) -> Option<Self> {
        Self::LABELS
            .iter()
            .position(|l| *l == text)
            .map(|code| Self::from_code(code as u8))
    }
}

pub(crate) fn label_data_type() -> DataType {
    DataType::Dictionary(Box::new(DataType::UInt8), Box::new(DataType::Utf8))
}

pub(crate) fn build_labels<'a, L: Label>(values: impl ExactSizeIterator<Item = &'a L>) -> ArrayRef {
    let keys = UInt8Array::from_iter_values(values.map(|v| v.code()));
    let dictionary = Arc::new(StringArray::from_iter_values(L::LABELS.iter()));
    Arc::new(DictionaryArray::<UInt8Type>::try_new(keys, dictionary).expect("codes index LABELS"))
}

pub(crate) fn extract_labels<L: Label>(
    array: &ArrayRef,
    path: &Path,
    column: &str,
) -> Result<Vec<L>> {
    let a = downcast::<DictionaryArray<UInt8Type>>(array, path, column)?;
    let dictionary = downcast::<StringArray>(a.values(), path, column)?;
    // Translate the file's dictionary to our codes once per batch, not once per row.
    let codes = dictionary
        .iter()
        .map(|label| {
            let label = label.unwrap_or("");
            L::from_label(label).ok_or_else(|| {
                let known = L::LABELS.join(", ");
                column_error(
                    path,
                    column,
                    format!("unknown value `{label}` (known: {known})"),
                )
            })
        })
        .collect::<Result<Vec<L>>>()?;
    if a.null_count() > 0 {
        return Err(column_error(path, column, "has missing values but may not"));
    }
    Ok(a.keys()
        .values()
        .iter()
        .map(|k| codes[*k as usize])
        .collect())
}

/// An optional label column: missing values are nulls of the dictionary column.
pub(crate) fn build_optional_labels<'a, L: Label>(
    values: impl ExactSizeIterator<Item = &'a Option<L>>,
) -> ArrayRef {
    let keys: UInt8Array = values.map(|v| v.map(Label::code)).collect();
    let dictionary = Arc::new(StringArray::from_iter_values(L::LABELS.iter()));
    Arc::new(DictionaryArray::<UInt8Type>::try_new(keys, dictionary).expect("codes index LABELS"))
}

pub(crate) fn extract_optional_labels<L: Label>(
    array: &ArrayRef,
    path: &Path,
    column: &str,
) -> Result<Vec<Option<L>>> {
    let a = downcast::<DictionaryArray<UInt8Type>>(array, path, column)?;
    let dictionary = downcast::<StringArray>(a.values(), path, column)?;
    // A dictionary read back from Parquet may hold an entry no row uses (an empty string for
    // a column of nulls): only the entries rows point at must be labels.
    let codes: Vec<Option<L>> = dictionary
        .iter()
        .map(|label| L::from_label(label.unwrap_or("")))
        .collect();
    // A label a later minor version added is a value this reader cannot name: missing, as
    // FORMAT.md's rule for minor versions says; only a key past the dictionary is damage.
    a.keys()
        .iter()
        .map(|key| {
            let Some(key) = key else { return Ok(None) };
            codes.get(key as usize).copied().ok_or_else(|| {
                column_error(
                    path,
                    column,
                    format!("dictionary key {key} past its {} entries", codes.len()),
                )
            })
        })
        .collect()
}

/// Declares a [`Label`] enum and its column mapping.
macro_rules! label_enum {
    ($(#[$meta:meta])* pub enum $name:ident { $( $(#[$vmeta:meta])* $variant:ident = $label:literal ),* $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[repr(u8)]
        pub enum $name { $( $(#[$vmeta])* $variant ),* }

        impl $crate::columns::Label for $name {
            const LABELS: &'static [&'static str] = &[$($label),*];
            fn code(self) -> u8 {
                self as u8
            }
            fn from_code(code: u8) -> Self {
                const ALL: &[$name] = &[$($name::$variant),*];
                ALL[code as usize]
            }
        }

        impl $crate::columns::ColumnValue for $name {
            fn data_type() -> arrow_schema::DataType {
                $crate::columns::label_data_type()
            }
            fn build<'a>(values: impl ExactSizeIterator<Item = &'a Self>) -> arrow_array::ArrayRef {
                $crate::columns::build_labels(values)
            }
            fn extract(
                array: &arrow_array::ArrayRef,
                path: &std::path::Path,
                column: &str,
            ) -> $crate::error::Result<Vec<Self>> {
                $crate::columns::extract_labels(array, path, column)
            }
        }

        impl $crate::columns::ColumnValue for Option<$name> {
            fn data_type() -> arrow_schema::DataType {
                $crate::columns::label_data_type()
            }
            fn nullable() -> bool {
                true
            }
            fn build<'a>(values: impl ExactSizeIterator<Item = &'a Self>) -> arrow_array::ArrayRef {
                $crate::columns::build_optional_labels(values)
            }
            fn extract(
                array: &arrow_array::ArrayRef,
                path: &std::path::Path,
                column: &str,
            ) -> $crate::error::Result<Vec<Self>> {
                $crate::columns::extract_optional_labels(array, path, column)
            }
            fn absent(rows: usize) -> Option<Vec<Self>> {
                Some(vec![None; rows])
            }
        }
    };
}
pub(crate) use label_enum;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Snoop;

    fn snoops(labels: &[&str], keys: &[Option<u8>]) -> Result<Vec<Option<Snoop>>> {
        let keys: UInt8Array = keys.iter().copied().collect();
        let dictionary = Arc::new(StringArray::from_iter_values(labels.iter()));
        let array: ArrayRef =
            Arc::new(DictionaryArray::<UInt8Type>::try_new(keys, dictionary).unwrap());
        extract_optional_labels::<Snoop>(&array, Path::new("p"), "snoop")
    }

    #[test]
    fn an_optional_label_of_a_later_version_reads_as_missing() {
        let read = snoops(&["hitm", "xfer"], &[Some(0), Some(1), None]).unwrap();
        assert_eq!(read, vec![Some(Snoop::Hitm), None, None]);
    }
}
