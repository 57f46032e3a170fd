//! llama.cpp's process-wide state and its model-file tools, below both the model
//! registry (which re-encodes a downloaded GGUF on install) and the local chat runtime
//! (which loads models on the same backend).

use std::path::Path;
use std::sync::OnceLock;

use llama_cpp_2::llama_backend::LlamaBackend;

use crate::error::{Error, Result};

/// llama.cpp's process-wide backend, initialised once (its logs silenced).
pub(crate) fn backend() -> Result<&'static LlamaBackend> {
    static BACKEND: OnceLock<std::result::Result<LlamaBackend, String>> = OnceLock::new();
    BACKEND
        .get_or_init(|| {
            let mut backend = LlamaBackend::init().map_err(|e| format!("llama.cpp backend: {e}"))?;
            // llama.cpp reports every tensor it loads on stderr.
            backend.void_logs();
            Ok(backend)
        })
        .as_ref()
        .map_err(|e| Error::Model(e.clone()))
}

/// A GGUF re-encoding that llama.cpp's own quantizer can produce.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum Quant {
    /// 8-bit blocks of 32 with one scale: near-lossless from any 4-bit file, and a type
    /// llama.cpp's x86 matrix kernels cover (its 4-bit `Q4_1` is not).
    Q8_0,
}

/// Re-encodes the GGUF `from` as `to` with llama.cpp's quantizer (tensor data only; the
/// header's metadata, tokenizer and template included, is copied). Deterministic for a
/// given llama.cpp version.
pub fn requantize(from: &Path, to: &Path, quant: Quant) -> Result<()> {
    backend()?; // its log setting silences the quantizer's per-tensor report
    let c_path = |p: &Path| {
        std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).map_err(|_| Error::input(p, "path holds a NUL byte"))
    };
    let (input, output) = (c_path(from)?, c_path(to)?);
    // SAFETY: the defaults come from llama.cpp itself; both paths are NUL-terminated
    // strings that outlive the call, and no pointer field of the parameters is set.
    let rc = unsafe {
        let mut params = llama_cpp_sys_2::llama_model_quantize_default_params();
        params.ftype = match quant {
            Quant::Q8_0 => llama_cpp_sys_2::LLAMA_FTYPE_MOSTLY_Q8_0,
        };
        params.allow_requantize = true;
        params.nthread = crate::threads::get() as i32;
        llama_cpp_sys_2::llama_model_quantize(input.as_ptr(), output.as_ptr(), &params)
    };
    if rc != 0 {
        return Err(Error::Model(format!(
            "llama.cpp could not requantize {} to {quant:?} (code {rc})",
            from.display()
        )));
    }
    Ok(())
}
