//! Figures for a student, drawn headless and shown inline in Jupyter (or saved as files
//! outside it): the plumbing they share ([`Figure`]), the training curves, the confusion
//! matrix, image grids (and a gallery of each class), and [`show_any`] for exported notebooks. The rich-output protocol
//! itself lives on the ground floor (`display`) and is re-exported here, where notebooks
//! have always found it.
mod confusion_plot;
mod curves;
mod figure;
mod gallery;
mod grid;
mod lr_find_plot;
mod show;

pub use crate::display::{display_bytes, in_notebook, Mime};
pub use confusion_plot::confusion_matrix_plot;
pub use curves::loss_accuracy_curves;
pub use figure::Figure;
pub use gallery::class_gallery;
pub use grid::image_grid;
pub use lr_find_plot::lr_find_plot;
pub use show::show_any;
