//! Showing results to a student: inline in Jupyter (the evcxr kernel's rich output protocol)
//! or, outside a notebook, as files and plain text.
mod display;
mod plot;
mod progress;

pub use display::{display_bytes, in_notebook, Mime};
pub use plot::{confusion_matrix_plot, image_grid, loss_accuracy_curves, Figure};
pub use progress::Progress;
