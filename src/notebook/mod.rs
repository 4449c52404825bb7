//! Showing results to a student: inline in Jupyter (the evcxr kernel's rich output protocol)
//! or, outside a notebook, as files and plain text.
mod display;

pub use display::{display_bytes, in_notebook, Mime};
