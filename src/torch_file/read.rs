//! Reading a `torch.save` file: the zip archive's `data.pkl` run through a pickle machine that
//! knows the opcodes of Python's pickle protocols 2-5 and the few callables `torch.save` writes
//! (`torch._utils._rebuild_tensor_v2`, `_rebuild_parameter`, `collections.OrderedDict`, ...),
//! with each storage read from its own record (`data/<key>`). libtorch's C++ unpickler cannot do
//! this: it turns every `collections.OrderedDict` into None (so no `state_dict()` reads), which is
//! why this module exists. Objects of other classes become [`TorchValue::Object`]; nothing is
//! executed.
use std::collections::HashMap;
use std::io::Read;
use std::path::Path;

use tch::Tensor;

use super::pickle_value::{node, value, Node, Obj, Step};
use super::rebuild::{self, append, as_text, finish, set_items};
use super::TorchValue;
use crate::{Error, Result, WithPath};

/// Reads the file at `path` (zip format).
pub(super) fn load(path: &Path) -> Result<TorchValue> {
    let bad = |m: String| Error::parse(path, "torch.save file", m);
    let file = std::fs::File::open(path).with_path(path)?;
    let mut magic = [0u8; 2];
    (&file).read_exact(&mut magic).map_err(|_| bad("empty or truncated".into()))?;
    if &magic != b"PK" {
        return Err(bad("not a zip archive: trainbook reads files that torch.save writes in its \
                        default (zip) format since PyTorch 1.6, not the legacy format"
            .into()));
    }
    let mut zip = zip::ZipArchive::new(file).map_err(|e| bad(format!("zip archive: {e}")))?;
    let pkl = zip
        .file_names()
        .map(str::to_string)
        .find(|n| n.ends_with("data.pkl") && n.matches('/').count() == 1)
        .ok_or_else(|| bad("no data.pkl in the archive".into()))?;
    let prefix = pkl.trim_end_matches("data.pkl").to_string();
    let mut record = |name: &str| -> Step<Vec<u8>> {
        let full = format!("{prefix}{name}");
        let mut entry = zip.by_name(&full).map_err(|e| format!("record {full}: {e}"))?;
        let mut bytes = Vec::new();
        entry.read_to_end(&mut bytes).map_err(|e| format!("record {full}: {e}"))?;
        Ok(bytes)
    };
    if let Ok(order) = record("byteorder") {
        if order != b"little" {
            return Err(bad(format!(
                "byte order {:?}: only little-endian files are read",
                String::from_utf8_lossy(&order)
            )));
        }
    }
    let data = record("data.pkl").map_err(bad)?;
    unpickle(&data, &mut record).map_err(bad)
}

/// Runs the pickle `data`, reading storages with `record("data/<key>")`.
pub(super) fn unpickle(
    data: &[u8],
    record: &mut dyn FnMut(&str) -> Step<Vec<u8>>,
) -> Step<TorchValue> {
    let mut machine = Machine {
        data,
        pos: 0,
        stack: Vec::new(),
        memo: HashMap::new(),
        storages: HashMap::new(),
        record,
    };
    let root = machine.run().map_err(|m| format!("data.pkl: {m}"))?;
    finish(&root, 0)
}

struct Machine<'a> {
    data: &'a [u8],
    pos: usize,
    stack: Vec<Node>,
    memo: HashMap<u32, Node>,
    storages: HashMap<String, Tensor>,
    record: &'a mut dyn FnMut(&str) -> Step<Vec<u8>>,
}

impl Machine<'_> {
    fn call(&mut self, callable: &Node, args: Node) -> Step<Node> {
        rebuild::call(callable, args)
    }
    fn storage(&mut self, pid: &Node) -> Step<Node> {
        rebuild::storage(pid, &mut self.storages, self.record)
    }
    fn take(&mut self, n: usize) -> Step<&[u8]> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.data.len());
        let end = end.ok_or_else(|| format!("truncated at byte {}", self.pos))?;
        let out = &self.data[self.pos..end];
        self.pos = end;
        Ok(out)
    }
    fn u8(&mut self) -> Step<u8> {
        Ok(self.take(1)?[0])
    }
    fn le<const N: usize>(&mut self) -> Step<[u8; N]> {
        Ok(self.take(N)?.try_into().expect("N bytes"))
    }
    fn line(&mut self) -> Step<String> {
        let rest = &self.data[self.pos..];
        let end = rest.iter().position(|&b| b == b'\n').ok_or("unterminated line")?;
        let text = String::from_utf8_lossy(&rest[..end]).into_owned();
        self.pos += end + 1;
        Ok(text)
    }
    fn text(&mut self, n: usize) -> Step<Node> {
        Ok(value(TorchValue::Str(String::from_utf8_lossy(self.take(n)?).into_owned())))
    }
    fn pop(&mut self) -> Step<Node> {
        self.stack.pop().ok_or_else(|| "stack underflow".to_string())
    }
    /// The items above the topmost mark, which is removed.
    fn pop_mark(&mut self) -> Step<Vec<Node>> {
        let at = self.stack.iter().rposition(|n| matches!(*n.borrow(), Obj::Mark));
        let at = at.ok_or("no mark on the stack")?;
        let items = self.stack.split_off(at + 1);
        self.stack.pop();
        Ok(items)
    }
    fn top(&self) -> Step<Node> {
        self.stack.last().cloned().ok_or_else(|| "stack underflow".to_string())
    }
    fn memo_get(&self, i: u32) -> Step<Node> {
        self.memo.get(&i).cloned().ok_or_else(|| format!("memo {i} is empty"))
    }

    fn run(&mut self) -> Step<Node> {
        loop {
            let op = self.u8()?;
            match op {
                0x80 => {
                    self.u8()?;
                }
                0x95 => {
                    self.le::<8>()?;
                }
                b'.' => return self.pop(),
                b'(' => self.stack.push(node(Obj::Mark)),
                b'0' => {
                    self.pop()?;
                }
                b'1' => {
                    self.pop_mark()?;
                }
                b'2' => {
                    let top = self.top()?;
                    self.stack.push(top);
                }
                b'N' => self.stack.push(value(TorchValue::None)),
                0x88 => self.stack.push(value(TorchValue::Bool(true))),
                0x89 => self.stack.push(value(TorchValue::Bool(false))),
                b'J' => {
                    let v = i32::from_le_bytes(self.le()?) as i64;
                    self.stack.push(value(TorchValue::Int(v)))
                }
                b'K' => {
                    let v = self.u8()? as i64;
                    self.stack.push(value(TorchValue::Int(v)))
                }
                b'M' => {
                    let v = u16::from_le_bytes(self.le()?) as i64;
                    self.stack.push(value(TorchValue::Int(v)))
                }
                b'I' | b'L' => {
                    let line = self.line()?;
                    let v = match line.trim_end_matches('L') {
                        "01" => TorchValue::Bool(true),
                        "00" => TorchValue::Bool(false),
                        t => TorchValue::Int(t.parse().map_err(|_| format!("int {line:?}"))?),
                    };
                    self.stack.push(value(v));
                }
                0x8a | 0x8b => {
                    let n = if op == 0x8a {
                        self.u8()? as usize
                    } else {
                        u32::from_le_bytes(self.le()?) as usize
                    };
                    let bytes = self.take(n)?;
                    if n > 8 {
                        return Err(format!("an integer of {n} bytes does not fit in 64 bits"));
                    }
                    let mut buf = if bytes.last().is_some_and(|b| b & 0x80 != 0) {
                        [0xff; 8]
                    } else {
                        [0; 8]
                    };
                    buf[..n].copy_from_slice(bytes);
                    self.stack.push(value(TorchValue::Int(i64::from_le_bytes(buf))));
                }
                b'G' => {
                    let v = f64::from_be_bytes(self.le()?);
                    self.stack.push(value(TorchValue::Float(v)))
                }
                b'F' => {
                    let line = self.line()?;
                    self.stack.push(value(TorchValue::Float(
                        line.parse().map_err(|_| format!("float {line:?}"))?,
                    )));
                }
                b'X' | b'T' | b'B' => {
                    let n = u32::from_le_bytes(self.le()?) as usize;
                    let s = self.text(n)?;
                    self.stack.push(s);
                }
                0x8c | b'U' | b'C' => {
                    let n = self.u8()? as usize;
                    let s = self.text(n)?;
                    self.stack.push(s);
                }
                0x8d | 0x8e => {
                    let n = u64::from_le_bytes(self.le()?) as usize;
                    let s = self.text(n)?;
                    self.stack.push(s);
                }
                b'V' | b'S' => {
                    let line = self.line()?;
                    self.stack.push(value(TorchValue::Str(
                        line.trim_matches(|c| c == '\'' || c == '"').to_string(),
                    )));
                }
                b']' => self.stack.push(node(Obj::List(Vec::new()))),
                b')' => self.stack.push(node(Obj::Tuple(Vec::new()))),
                b'}' => self.stack.push(node(Obj::Dict(Vec::new()))),
                0x8f => self.stack.push(node(Obj::List(Vec::new()))),
                b'l' => {
                    let items = self.pop_mark()?;
                    self.stack.push(node(Obj::List(items)));
                }
                b't' | 0x91 => {
                    let items = self.pop_mark()?;
                    self.stack.push(node(Obj::Tuple(items)));
                }
                0x85..=0x87 => {
                    let n = (op - 0x84) as usize;
                    if self.stack.len() < n {
                        return Err("stack underflow".into());
                    }
                    let items = self.stack.split_off(self.stack.len() - n);
                    self.stack.push(node(Obj::Tuple(items)));
                }
                b'd' => {
                    let items = self.pop_mark()?;
                    let d = node(Obj::Dict(Vec::new()));
                    set_items(&d, items)?;
                    self.stack.push(d);
                }
                b'a' => {
                    let item = self.pop()?;
                    append(&self.top()?, vec![item])?;
                }
                b'e' | 0x90 => {
                    let items = self.pop_mark()?;
                    append(&self.top()?, items)?;
                }
                b's' => {
                    let v = self.pop()?;
                    let k = self.pop()?;
                    set_items(&self.top()?, vec![k, v])?;
                }
                b'u' => {
                    let items = self.pop_mark()?;
                    set_items(&self.top()?, items)?;
                }
                b'c' => {
                    // Protocol 2 spells builtins with Python 2's module names, as Python's
                    // unpickler (fix_imports) maps back.
                    let module = match self.line()?.as_str() {
                        "__builtin__" => "builtins".to_string(),
                        "copy_reg" => "copyreg".to_string(),
                        other => other.to_string(),
                    };
                    let name = self.line()?;
                    self.stack.push(node(Obj::Global(module, name)));
                }
                0x93 => {
                    let name = self.pop()?;
                    let module = self.pop()?;
                    let (m, n) = (as_text(&module)?, as_text(&name)?);
                    self.stack.push(node(Obj::Global(m, n)));
                }
                b'R' | 0x81 => {
                    let args = self.pop()?;
                    let callable = self.pop()?;
                    let made = self.call(&callable, args)?;
                    self.stack.push(made);
                }
                0x92 => {
                    let _kwargs = self.pop()?;
                    let args = self.pop()?;
                    let callable = self.pop()?;
                    let made = self.call(&callable, args)?;
                    self.stack.push(made);
                }
                b'b' => {
                    let state = self.pop()?;
                    let target = self.top()?;
                    let mut t = target.borrow_mut();
                    if let Obj::Object { state: s, .. } = &mut *t {
                        *s = state;
                    }
                    // Other targets (an OrderedDict's `_metadata`, a tensor's state) keep no state.
                }
                b'p' => {
                    let i: u32 = self.line()?.parse().map_err(|_| "PUT index")?;
                    let top = self.top()?;
                    self.memo.insert(i, top);
                }
                b'q' => {
                    let i = self.u8()? as u32;
                    let top = self.top()?;
                    self.memo.insert(i, top);
                }
                b'r' => {
                    let i = u32::from_le_bytes(self.le()?);
                    let top = self.top()?;
                    self.memo.insert(i, top);
                }
                0x94 => {
                    let i = self.memo.len() as u32;
                    let top = self.top()?;
                    self.memo.insert(i, top);
                }
                b'g' => {
                    let i: u32 = self.line()?.parse().map_err(|_| "GET index")?;
                    self.stack.push(self.memo_get(i)?);
                }
                b'h' => {
                    let i = self.u8()? as u32;
                    self.stack.push(self.memo_get(i)?);
                }
                b'j' => {
                    let i = u32::from_le_bytes(self.le()?);
                    self.stack.push(self.memo_get(i)?);
                }
                b'Q' => {
                    let pid = self.pop()?;
                    let storage = self.storage(&pid)?;
                    self.stack.push(storage);
                }
                other => {
                    return Err(format!(
                        "unsupported pickle opcode 0x{other:02x} at byte {}",
                        self.pos - 1
                    ))
                }
            }
        }
    }
}
