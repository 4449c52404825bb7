//! Showing results to a student: inline in Jupyter (the evcxr kernel's rich output protocol)
//! or, outside a notebook, as files and plain text.
mod display;
mod grid;
pub mod launch;
mod plot;
mod progress;

pub use display::{display_bytes, in_notebook, Mime};
pub use grid::image_grid;
pub use plot::{confusion_matrix_plot, loss_accuracy_curves, Figure};
pub use progress::Progress;

/// Shows a notebook cell's final value in an exported program: a [`Figure`] is displayed inline
/// in a notebook and saved as `figures/<label>.png` otherwise; other values are ignored.
pub fn show_any<T: std::any::Any>(value: &T, label: &str) {
    if let Some(fig) = (value as &dyn std::any::Any).downcast_ref::<Figure>() {
        let shown = fig.show().unwrap_or(false);
        if !shown {
            let path = std::path::Path::new("figures").join(format!("{label}.png"));
            match fig.save(&path) {
                Ok(()) => println!("saved {}", path.display()),
                Err(e) => eprintln!("could not save {}: {e}", path.display()),
            }
        }
    }
}
