//! Prints the column reference of docs/FORMAT.md, generated from the table declarations.

fn main() {
    print!("{}", numalens_format::column_reference());
}
