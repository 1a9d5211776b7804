//! The column reference of `docs/FORMAT.md`, generated from the table declarations so that the
//! document cannot drift from the code (a test compares them).

use arrow_schema::DataType;

use crate::table::{ColumnEncoding, Row};
use crate::tables::{
    CodeLocation, Migration, Object, PageNodes, PageStat, Sample, SiteFrame, Thread,
};

/// Markdown tables of every table's columns, in file order.
pub fn column_reference() -> String {
    [
        table_markdown::<Sample>(),
        table_markdown::<Thread>(),
        table_markdown::<SiteFrame>(),
        table_markdown::<Object>(),
        table_markdown::<PageStat>(),
        table_markdown::<Migration>(),
        table_markdown::<PageNodes>(),
        table_markdown::<CodeLocation>(),
    ]
    .join("\n")
}

fn table_markdown<R: Row>() -> String {
    let schema = R::schema();
    let mut out = format!(
        "### `{}.parquet`\n\n| column | type | null | encoding | meaning |\n|---|---|---|---|---|\n",
        R::TABLE
    );
    for (column, field) in R::COLUMNS.iter().zip(schema.fields()) {
        let null = if field.is_nullable() { "yes" } else { "no" };
        out += &format!(
            "| `{}` | {} | {} | {} | {} |\n",
            column.name,
            type_name(field.data_type()),
            null,
            encoding_name(column.encoding),
            column.doc.trim()
        );
    }
    out
}

fn type_name(data_type: &DataType) -> String {
    match data_type {
        DataType::Dictionary(_, _) => "string (dictionary)".to_string(),
        DataType::Utf8 => "string".to_string(),
        other => other.to_string().to_lowercase(),
    }
}

fn encoding_name(encoding: ColumnEncoding) -> &'static str {
    match encoding {
        ColumnEncoding::Dict => "dictionary + zstd",
        ColumnEncoding::Delta => "delta, uncompressed",
        ColumnEncoding::Plain => "plain + zstd",
        ColumnEncoding::Split => "byte-stream-split + zstd",
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn docs_format_md_holds_the_current_column_reference() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/FORMAT.md");
        let doc = std::fs::read_to_string(path).expect("docs/FORMAT.md exists");
        let reference = super::column_reference();
        assert!(
            doc.contains(&reference),
            "docs/FORMAT.md is out of date; paste the output of \
             `cargo run -p numalens-format --example format_doc` between its column markers:\n{reference}"
        );
    }
}
