//! Models defined in PyTorch: [`ScriptModule`] loads a module saved with `torch.jit.save`
//! (after `torch.jit.script` or `torch.jit.trace`) through libtorch's own loader, and puts its
//! parameters and buffers into a `VarStore` under their PyTorch names, so that `fit` trains it
//! as a trainbook model (optimizer, DDP, EMA, checkpoints, resume); [`export_traced`] writes a
//! trainbook model as a traced TorchScript module that PyTorch loads with `torch.jit.load`.
use std::cell::Cell;
use std::ffi::{c_void, CStr, CString};
use std::os::raw::c_char;
use std::path::Path;
use std::ptr::NonNull;

use tch::nn::{self, ModuleT};
use tch::{Device, Tensor};

use crate::shim::script::{
    tb_script_forward, tb_script_free, tb_script_load, tb_script_named_tensors, tb_script_save,
    tb_script_trace_save, tb_script_train, TbScript,
};
use crate::shim::{check_kernel, tensor_ptrs};
use crate::{Error, Result};

/// A TorchScript module (what `torch.jit.load` returns) whose parameters (trainable where
/// they require gradients) and buffers (BatchNorm's running statistics, not trainable) are
/// variables of a `VarStore` under their PyTorch names (`layer1.0.conv1.weight`): the same
/// tensors, so an optimizer step on the store's variables changes the module, and a checkpoint
/// of the store holds all of its state.
///
/// ```no_run
/// use trainbook::models::ScriptModule;
/// use trainbook::prelude::*;
/// # fn run(dist: &Dist, train: &mut DataLoader<Mnist>, val: &mut DataLoader<Mnist>) -> trainbook::Result<()> {
/// // In Python: torch.jit.script(model).save("model.pt")
/// let mut vs = VarStore::new(Device::Cpu);
/// let net = ScriptModule::load("model.pt", &vs.root())?;
/// let logits = net.forward_t(&Tensor::zeros([2, 3, 32, 32], (Kind::Float, Device::Cpu)), false);
/// let mut opt = Optimizer::sgd(&vs, 0.1, 0.9);
/// Trainer::new(dist).fit(&mut vs, &net, &mut opt, train, val)?;
/// # Ok(()) }
/// ```
pub struct ScriptModule {
    module: NonNull<TbScript>,
    /// The training mode the module is in (`None`: as loaded).
    train: Cell<Option<bool>>,
}

// SAFETY: the module is owned by this handle alone and used from one thread at a time (the
// handle is not `Sync`); libtorch's modules may move between threads.
unsafe impl Send for ScriptModule {}

impl std::fmt::Debug for ScriptModule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScriptModule").field("train", &self.train.get()).finish_non_exhaustive()
    }
}

impl Drop for ScriptModule {
    fn drop(&mut self) {
        // SAFETY: the handle came from tb_script_load and is freed once.
        unsafe { tb_script_free(self.module.as_ptr()) };
    }
}

/// The C string of `path`, or an error naming it.
fn c_path(path: &Path) -> Result<CString> {
    CString::new(path.as_os_str().as_encoded_bytes())
        .map_err(|_| Error::InvalidArgument(format!("{}: a NUL byte in the path", path.display())))
}

impl ScriptModule {
    /// Loads the TorchScript module at `path` onto `root`'s device and adds its parameters
    /// and buffers to `root`'s store under their names (below `root`'s own path). Errors: a
    /// file libtorch cannot load (the message names the path), or a name already in the store.
    pub fn load(path: impl AsRef<Path>, root: &nn::Path) -> Result<ScriptModule> {
        let path = path.as_ref();
        let (device_type, device_index) = match root.device() {
            Device::Cpu => (0, 0),
            Device::Cuda(i) => (1, i as i32),
            other => {
                return Err(Error::InvalidArgument(format!(
                    "a TorchScript module on {other:?}: only the CPU and CUDA devices are supported"
                )))
            }
        };
        let c = c_path(path)?;
        let mut out = std::ptr::null_mut();
        let op = format!("torch.jit.load({})", path.display());
        // SAFETY: `c` is a NUL-terminated path; on success `out` is an owned handle.
        check_kernel(&op, unsafe {
            tb_script_load(c.as_ptr(), device_type, device_index, &mut out)
        })?;
        let module =
            NonNull::new(out).ok_or_else(|| Error::Kernel { op, message: "no module".into() })?;
        let script = ScriptModule { module, train: Cell::new(None) };
        for (buffers, trainable_if_grad) in [(false, true), (true, false)] {
            for (name, tensor) in script.named_tensors(buffers)? {
                let trainable = trainable_if_grad && tensor.requires_grad();
                let (parents, leaf) = match name.rsplit_once('.') {
                    Some((parents, leaf)) => (parents.split('.').collect::<Vec<_>>(), leaf),
                    None => (Vec::new(), name.as_str()),
                };
                let at = parents.iter().fold(root.clone(), |p, part| p / *part);
                if at.get(leaf).is_some() {
                    return Err(Error::InvalidArgument(format!(
                        "{}: the store already has a variable {}",
                        path.display(),
                        at.path(leaf)
                    )));
                }
                let _variable = at.add(leaf, tensor, trainable);
            }
        }
        Ok(script)
    }

    /// The module's parameters (`buffers` false) or buffers, by name, in its order.
    fn named_tensors(&self, buffers: bool) -> Result<Vec<(String, Tensor)>> {
        unsafe extern "C" fn each(ctx: *mut c_void, name: *const c_char, tensor: *mut c_void) {
            // SAFETY: `ctx` is the Vec below; `name` a NUL-terminated string; `tensor` an owned
            // at::Tensor* handed over by the shim.
            let out = &mut *(ctx as *mut Vec<(String, Tensor)>);
            let name = CStr::from_ptr(name).to_string_lossy().into_owned();
            out.push((name, Tensor::from_ptr(tensor as *mut torch_sys::C_tensor)));
        }
        let mut out: Vec<(String, Tensor)> = Vec::new();
        let ctx = &mut out as *mut Vec<(String, Tensor)> as *mut c_void;
        // SAFETY: the module is live; `each` matches the callback's signature and `ctx` outlives
        // the call.
        check_kernel("TorchScript named tensors", unsafe {
            tb_script_named_tensors(self.module.as_ptr(), buffers as i32, ctx, each)
        })?;
        Ok(out)
    }

    /// The module's forward on `inputs` (several for a model of several inputs), in training
    /// mode or not (`module.train(train)`, switched only when it changes). Errors: what
    /// TorchScript reports (wrong count or shape of inputs), or an output that is not a tensor.
    pub fn forward_all(&self, inputs: &[&Tensor], train: bool) -> Result<Tensor> {
        if self.train.get() != Some(train) {
            // SAFETY: the module is live and used from this thread alone.
            check_kernel("TorchScript train()", unsafe {
                tb_script_train(self.module.as_ptr(), train as i32)
            })?;
            self.train.set(Some(train));
        }
        let ptrs = tensor_ptrs(inputs);
        let mut out = std::ptr::null_mut();
        // SAFETY: the inputs are live tensors; on success `out` is an owned at::Tensor*.
        check_kernel("TorchScript forward", unsafe {
            tb_script_forward(self.module.as_ptr(), ptrs.as_ptr(), ptrs.len(), &mut out)
        })?;
        // SAFETY: as above.
        Ok(unsafe { Tensor::from_ptr(out as *mut torch_sys::C_tensor) })
    }

    /// Saves the module (with its current weights: the store's variables are its tensors) with
    /// `torch.jit.save`'s format.
    pub fn save(&self, path: impl AsRef<Path>) -> Result<()> {
        let path = path.as_ref();
        let c = c_path(path)?;
        // SAFETY: the module is live; `c` is a NUL-terminated path.
        check_kernel(&format!("torch.jit.save({})", path.display()), unsafe {
            tb_script_save(self.module.as_ptr(), c.as_ptr())
        })
    }
}

impl ModuleT for ScriptModule {
    /// [`forward_all`](ScriptModule::forward_all) on one input. Panics with TorchScript's
    /// message where that errs (as a tch layer panics on a wrong shape); call `forward_all` to
    /// get the error instead.
    fn forward_t(&self, xs: &Tensor, train: bool) -> Tensor {
        self.forward_all(&[xs], train).unwrap_or_else(|e| panic!("{e}"))
    }
}

/// Writes `model` (its variables in `vs`) as a TorchScript module traced on `example`
/// (`torch.jit.trace` of its evaluation-mode forward), which PyTorch loads with
/// `torch.jit.load(path)` and runs without trainbook: the store's variables become the
/// module's parameters (the trainable ones) and buffers under their names, the traced graph
/// reads them as attributes; a traced module repeats the operations of this one pass (no
/// data-dependent branches). Errors: what the tracer reports, or a file that cannot be written.
///
/// ```no_run
/// use tch::nn::VarStore;
/// use tch::{Device, Kind, Tensor};
/// use trainbook::models::{export_traced, MnistNet};
/// # fn main() -> trainbook::Result<()> {
/// let vs = VarStore::new(Device::Cpu);
/// let net = MnistNet::new(&vs.root());
/// let example = Tensor::zeros([1, 1, 28, 28], (Kind::Float, Device::Cpu));
/// export_traced(&vs, &net, &example, "mnist.pt")?; // in Python: torch.jit.load("mnist.pt")
/// # Ok(()) }
/// ```
pub fn export_traced(
    vs: &nn::VarStore,
    model: &dyn ModuleT,
    example: &Tensor,
    path: impl AsRef<Path>,
) -> Result<()> {
    unsafe extern "C" fn forward(ctx: *mut c_void, input: *const c_void) -> *mut c_void {
        // SAFETY: `ctx` is the model reference below; `input` a live at::Tensor* the shim
        // owns (cloned as a new handle here, not taken).
        let model = &*(ctx as *const &dyn ModuleT);
        let x = Tensor::clone_from_ptr(input as *mut torch_sys::C_tensor);
        let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            tch::no_grad(|| model.forward_t(&x, false))
        }));
        match run {
            Ok(mut y) => {
                let ptr = y.as_mut_ptr() as *mut c_void;
                std::mem::forget(y); // the shim deletes the at::Tensor* it gets
                ptr
            }
            Err(_) => std::ptr::null_mut(),
        }
    }
    let path = path.as_ref();
    let mut named: Vec<(String, Tensor)> = vs.variables().into_iter().collect();
    named.sort_by(|a, b| a.0.cmp(&b.0));
    let names: Vec<CString> = named
        .iter()
        .map(|(n, _)| CString::new(n.as_str()))
        .collect::<std::result::Result<_, _>>()
        .map_err(|_| Error::InvalidArgument("a variable name with a NUL byte".into()))?;
    let name_ptrs: Vec<*const c_char> = names.iter().map(|n| n.as_ptr()).collect();
    let tensors: Vec<&Tensor> = named.iter().map(|(_, t)| t).collect();
    let tensor_ptrs = tensor_ptrs(&tensors);
    let is_param: Vec<i32> = named.iter().map(|(_, t)| t.requires_grad() as i32).collect();
    let c = c_path(path)?;
    let ctx = &model as *const &dyn ModuleT as *mut c_void;
    // SAFETY: every pointer lives until the call returns; the callback matches its type.
    check_kernel(&format!("torch.jit.trace to {}", path.display()), unsafe {
        tb_script_trace_save(
            name_ptrs.as_ptr(),
            tensor_ptrs.as_ptr(),
            is_param.as_ptr(),
            named.len(),
            example.as_ptr() as *const c_void,
            ctx,
            forward,
            c.as_ptr(),
        )
    })
}
