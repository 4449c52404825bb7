//! What the callables in a `torch.save` pickle build: tensors from their storage records
//! (`torch._utils._rebuild_tensor_v2` and the parameter wrappers around it), dicts
//! (`collections.OrderedDict`), and an inert [`TorchValue::Object`] for any other class.
//! Nothing named in a file is ever executed.
use std::collections::HashMap;

use tch::{Kind, Tensor};

use super::pickle_value::{node, value, Node, Obj, Step};
use super::TorchValue;

/// The result of calling `callable` (a global) with the tuple `args`.
pub(super) fn call(callable: &Node, args: Node) -> Step<Node> {
    let (module, name) = match &*callable.borrow() {
        Obj::Global(m, n) => (m.clone(), n.clone()),
        _ => return Err("a call of something that is not a class or function".into()),
    };
    let items = tuple_items(&args)?;
    match (module.as_str(), name.as_str()) {
        ("torch._utils", "_rebuild_tensor_v2" | "_rebuild_tensor") => rebuild_tensor(&items),
        ("torch._utils", "_rebuild_parameter" | "_rebuild_parameter_with_state") => {
            items.first().cloned().ok_or_else(|| "a parameter without its data".into())
        }
        ("torch._tensor", "_rebuild_from_type_v2") => match items.as_slice() {
            [func, _type, args, ..] => call(func, args.clone()),
            _ => Err("_rebuild_from_type_v2 with too few arguments".into()),
        },
        ("collections", "OrderedDict") => {
            let dict = node(Obj::Dict(Vec::new()));
            if let Some(pairs) = items.first() {
                let pairs: Vec<Node> = match &*pairs.borrow() {
                    Obj::List(p) | Obj::Tuple(p) => p.clone(),
                    _ => return Err("OrderedDict of something that is not a list".into()),
                };
                for pair in pairs {
                    set_items(&dict, tuple_items(&pair)?)?;
                }
            }
            Ok(dict)
        }
        ("torch", "Size") => items.first().cloned().ok_or_else(|| "torch.Size without dims".into()),
        _ => Ok(node(Obj::Object { class: format!("{module}.{name}"), state: args })),
    }
}

/// `_rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad, hooks, ...)`: a view
/// of the storage, sharing its memory with every other tensor of that storage, as in PyTorch.
fn rebuild_tensor(items: &[Node]) -> Step<Node> {
    let [storage, offset, size, stride, ..] = items else {
        return Err("_rebuild_tensor_v2 with too few arguments".into());
    };
    let storage = match &*storage.borrow() {
        Obj::Storage(t) => t.shallow_clone(),
        _ => return Err("a tensor whose storage is not a storage record".into()),
    };
    let offset = as_int(offset)?;
    let (size, stride) = (int_tuple(size)?, int_tuple(stride)?);
    // The last element the view reaches must lie in the storage (i128: no overflow on any input).
    let empty = size.contains(&0);
    let negative = offset < 0 || size.iter().chain(&stride).any(|&d| d < 0);
    let last: i128 = offset as i128
        + size.iter().zip(&stride).map(|(&n, &s)| (n as i128 - 1).max(0) * s as i128).sum::<i128>();
    if negative || size.len() != stride.len() || (!empty && last >= storage.numel() as i128) {
        return Err(format!(
            "a tensor of size {size:?} and stride {stride:?} at offset {offset} does not fit in \
             its storage of {} elements",
            storage.numel()
        ));
    }
    let t = storage.f_as_strided(&size, &stride, Some(offset)).map_err(|e| e.to_string())?;
    Ok(value(TorchValue::Tensor(t)))
}

/// A storage from its persistent id `('storage', torch.FloatStorage, key, location, numel)`,
/// read from the record `data/<key>` once and shared by every tensor that refers to it.
pub(super) fn storage(
    pid: &Node,
    storages: &mut HashMap<String, Tensor>,
    record: &mut dyn FnMut(&str) -> Step<Vec<u8>>,
) -> Step<Node> {
    let items = tuple_items(pid)?;
    let [tag, class, key, _location, numel] = items.as_slice() else {
        return Err("a persistent id that is not a storage".into());
    };
    if as_text(tag)? != "storage" {
        return Err(format!("a persistent id of kind {:?}", as_text(tag)?));
    }
    let class = match &*class.borrow() {
        Obj::Global(_, name) => name.clone(),
        _ => return Err("a storage without its type".into()),
    };
    let key = as_text(key)?;
    if let Some(t) = storages.get(&key) {
        return Ok(node(Obj::Storage(t.shallow_clone())));
    }
    let kind = storage_kind(&class)?;
    let bytes = record(&format!("data/{key}"))?;
    let elt = kind.elt_size_in_bytes();
    let numel = usize::try_from(as_int(numel)?).map_err(|_| "a negative storage size")?;
    let expected = if class == "UntypedStorage" { Some(numel) } else { numel.checked_mul(elt) };
    if expected != Some(bytes.len()) || bytes.len() % elt != 0 {
        return Err(format!("storage {key} ({class}, {numel} elements) has {} bytes", bytes.len()));
    }
    let t = Tensor::f_from_data_size(&bytes, &[(bytes.len() / elt) as i64], kind)
        .map_err(|e| e.to_string())?;
    storages.insert(key, t.shallow_clone());
    Ok(node(Obj::Storage(t)))
}

fn storage_kind(class: &str) -> Step<Kind> {
    Ok(match class {
        "FloatStorage" => Kind::Float,
        "DoubleStorage" => Kind::Double,
        "HalfStorage" => Kind::Half,
        "BFloat16Storage" => Kind::BFloat16,
        "LongStorage" => Kind::Int64,
        "IntStorage" => Kind::Int,
        "ShortStorage" => Kind::Int16,
        "CharStorage" => Kind::Int8,
        "ByteStorage" | "UntypedStorage" => Kind::Uint8,
        "BoolStorage" => Kind::Bool,
        "ComplexFloatStorage" => Kind::ComplexFloat,
        "ComplexDoubleStorage" => Kind::ComplexDouble,
        other => return Err(format!("storage type torch.{other} is not read")),
    })
}

/// Appends to a list (APPEND/APPENDS; a set's ADDITEMS builds a list too).
pub(super) fn append(target: &Node, items: Vec<Node>) -> Step<()> {
    match &mut *target.borrow_mut() {
        Obj::List(list) => {
            list.extend(items);
            Ok(())
        }
        _ => Err("APPEND to something that is not a list".into()),
    }
}

/// Sets key/value pairs (`items` alternates them) in a dict.
pub(super) fn set_items(target: &Node, items: Vec<Node>) -> Step<()> {
    if items.len() % 2 != 0 {
        return Err("a dict item without its value".into());
    }
    let mut t = target.borrow_mut();
    let Obj::Dict(entries) = &mut *t else {
        return Err("SETITEM on something that is not a dict".into());
    };
    let mut it = items.into_iter();
    while let (Some(k), Some(v)) = (it.next(), it.next()) {
        let key = key_of(&k);
        match entries.iter_mut().find(|(old, _)| key.is_some() && key_of(old) == key) {
            Some(entry) => entry.1 = v,
            None => entries.push((k, v)),
        }
    }
    Ok(())
}

/// A dict key's identity (str or int keys; others are never merged).
fn key_of(k: &Node) -> Option<String> {
    match &*k.borrow() {
        Obj::Value(TorchValue::Str(s)) => Some(format!("s{s}")),
        Obj::Value(TorchValue::Int(i)) => Some(format!("i{i}")),
        _ => None,
    }
}

pub(super) fn tuple_items(n: &Node) -> Step<Vec<Node>> {
    match &*n.borrow() {
        Obj::Tuple(items) | Obj::List(items) => Ok(items.clone()),
        _ => Err("expected a tuple".into()),
    }
}

pub(super) fn as_text(n: &Node) -> Step<String> {
    match &*n.borrow() {
        Obj::Value(TorchValue::Str(s)) => Ok(s.clone()),
        _ => Err("expected a str".into()),
    }
}

fn as_int(n: &Node) -> Step<i64> {
    match &*n.borrow() {
        Obj::Value(TorchValue::Int(i)) => Ok(*i),
        _ => Err("expected an int".into()),
    }
}

fn int_tuple(n: &Node) -> Step<Vec<i64>> {
    tuple_items(n)?.iter().map(as_int).collect()
}

/// The finished value of `n` (shared parts copied, tensors shared). Depth is bounded, so a
/// recursive structure (a list that contains itself) is an error, not a stack overflow.
pub(super) fn finish(n: &Node, depth: usize) -> Step<TorchValue> {
    if depth > 512 {
        return Err("values nested more than 512 deep (a recursive structure?)".into());
    }
    let all = |items: &[Node]| items.iter().map(|i| finish(i, depth + 1)).collect::<Step<Vec<_>>>();
    Ok(match &*n.borrow() {
        Obj::Value(v) => v.shallow_clone(),
        Obj::List(items) => TorchValue::List(all(items)?),
        Obj::Tuple(items) => TorchValue::Tuple(all(items)?),
        Obj::Dict(entries) => TorchValue::Dict(
            entries
                .iter()
                .map(|(k, v)| Ok((finish(k, depth + 1)?, finish(v, depth + 1)?)))
                .collect::<Step<Vec<_>>>()?,
        ),
        Obj::Global(m, name) => {
            TorchValue::Object { class: format!("{m}.{name}"), state: Box::new(TorchValue::None) }
        }
        Obj::Storage(t) => TorchValue::Tensor(t.shallow_clone()),
        Obj::Object { class, state } => {
            TorchValue::Object { class: class.clone(), state: Box::new(finish(state, depth + 1)?) }
        }
        Obj::Mark => return Err("a MARK left on the stack".into()),
    })
}
