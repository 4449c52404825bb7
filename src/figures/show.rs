//! How an exported notebook shows a cell's final value: what evcxr would display inline,
//! printed or saved to a file by a program running outside Jupyter (`trainbook::export`
//! emits calls to [`show_any`]).
use super::figure::Figure;

/// Shows a notebook cell's final value in an exported program: a [`Figure`] is displayed inline
/// in a notebook and saved as `figures/<label>.png` otherwise; any other value is printed as
/// evcxr shows it (its `Debug` form; `()` prints nothing).
///
/// ```
/// trainbook::notebook::show_any(&42, "cell-3"); // prints "42"
/// trainbook::notebook::show_any(&(), "cell-4"); // prints nothing
/// ```
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
