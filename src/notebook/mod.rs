//! Showing results to a student: inline in Jupyter (the evcxr kernel's rich output protocol)
//! or, outside a notebook, as files and plain text.
mod confusion_plot;
mod display;
mod grid;
mod plot;

pub use confusion_plot::confusion_matrix_plot;
pub use display::{display_bytes, in_notebook, Mime};
pub use grid::image_grid;
pub use plot::{loss_accuracy_curves, Figure};

/// Shows a notebook cell's final value in an exported program: a [`Figure`] is displayed inline
/// in a notebook and saved as `figures/<label>.png` otherwise; any other value is printed as
/// evcxr shows it (its `Debug` form; `()` prints nothing).
pub fn show_any<T: std::any::Any + std::fmt::Debug>(value: &T, label: &str) {
    let any = value as &dyn std::any::Any;
    if any.is::<()>() {
        return;
    }
    if let Some(fig) = any.downcast_ref::<Figure>() {
        let shown = fig.show().unwrap_or(false);
        if !shown {
            let path = std::path::Path::new("figures").join(format!("{label}.png"));
            match fig.save(&path) {
                Ok(()) => println!("saved {}", path.display()),
                Err(e) => eprintln!("could not save {}: {e}", path.display()),
            }
        }
    } else {
        println!("{value:?}");
    }
}
