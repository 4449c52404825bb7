//! The values of the pickle machine that reads a `torch.save` file (`read.rs`) and of the
//! callables it rebuilds (`rebuild.rs`): containers still being filled, classes named by the
//! pickle, storages, marks, and the outcome of one opcode.
use std::cell::RefCell;
use std::rc::Rc;

use tch::Tensor;

use super::TorchValue;

/// A value under construction: shared, because the pickle's memo refers back to values that
/// later opcodes still fill (a dict is memoised empty, then its items are set).
pub(super) type Node = Rc<RefCell<Obj>>;

/// A pickle machine's value: a finished [`TorchValue`] leaf, a container still being filled, a
/// class or function named by the pickle, a storage, an object of another class, or a mark.
pub(super) enum Obj {
    Value(TorchValue),
    List(Vec<Node>),
    Tuple(Vec<Node>),
    Dict(Vec<(Node, Node)>),
    Global(String, String),
    Storage(Tensor),
    Object { class: String, state: Node },
    Mark,
}

pub(super) fn node(o: Obj) -> Node {
    Rc::new(RefCell::new(o))
}
pub(super) fn value(v: TorchValue) -> Node {
    node(Obj::Value(v))
}

/// An opcode's outcome: an error is a message that the reader prefixes with the file.
pub(super) type Step<T> = std::result::Result<T, String>;
