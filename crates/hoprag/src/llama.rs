//! llama.cpp's process-wide state and its model-file tools, below both the model
//! registry (which re-encodes a downloaded GGUF on install) and the local chat runtime
//! (which loads models on the same backend). The only module besides the runtime that
//! calls llama.cpp: everything here exists only with the `local-llm` cargo feature, and
//! without it each entry point returns [`not_built`]'s error instead.

use std::path::Path;
#[cfg(feature = "local-llm")]
use std::sync::OnceLock;

#[cfg(feature = "local-llm")]
use llama_cpp_2::llama_backend::LlamaBackend;

use crate::error::{Error, Result};

/// Whether this build runs GGUF chat models in-process.
pub const BUILT: bool = cfg!(feature = "local-llm");

/// The error of asking a build without the `local-llm` feature for a local chat model:
/// what to rebuild with, and the alternative that needs no rebuild.
pub fn not_built(what: &str) -> Error {
    Error::Unsupported(format!(
        "{what} needs the in-process LLM runtime (llama.cpp), which this build of hoprag leaves out; \
         rebuild with the `local-llm` cargo feature (`cargo install --path crates/hoprag-cli --features local-llm`, \
         or `HOPRAG_FEATURES=local-llm ./scripts/quickstart.sh`; needs cmake and libclang), \
         or point `llm.base_url` (HOPRAG_LLM_BASE_URL) at an OpenAI-compatible endpoint"
    ))
}

#[cfg(feature = "local-llm")]
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
#[cfg(feature = "local-llm")]
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

#[cfg(not(feature = "local-llm"))]
pub fn requantize(from: &Path, _to: &Path, _quant: Quant) -> Result<()> {
    Err(not_built(&format!("re-encoding {}", from.display())))
}

/// The `general.name` a GGUF file's header states (the header only is read).
#[cfg(feature = "local-llm")]
pub fn gguf_general_name(path: &Path) -> Result<String> {
    let gguf = llama_cpp_2::gguf::GgufContext::from_file(path)
        .ok_or_else(|| Error::input(path, "not a readable GGUF file"))?;
    let key = gguf.find_key("general.name");
    if key < 0 {
        return Err(Error::input(path, "the GGUF header has no general.name"));
    }
    // Reading a value as the wrong type aborts inside ggml. 8 is the GGUF format's
    // string type.
    #[allow(clippy::unnecessary_cast)]
    if gguf.kv_type(key) as u32 != 8 {
        return Err(Error::input(path, "general.name is not a string"));
    }
    gguf.val_str(key).map(str::to_string).ok_or_else(|| Error::input(path, "general.name is not a string"))
}

#[cfg(not(feature = "local-llm"))]
pub fn gguf_general_name(path: &Path) -> Result<String> {
    Err(not_built(&format!("reading {}", path.display())))
}

/// The GBNF grammar of a JSON Schema, by llama.cpp's own converter (its `common`
/// library, which the bindings build anyway).
#[cfg(feature = "local-llm")]
pub fn json_schema_to_grammar(schema: &str) -> Result<String> {
    llama_cpp_2::json_schema_to_grammar(schema)
        .map_err(|e| Error::Model(format!("the answer's JSON Schema has no grammar ({e}): {schema}")))
}

#[cfg(not(feature = "local-llm"))]
pub fn json_schema_to_grammar(_schema: &str) -> Result<String> {
    Err(not_built("a grammar-constrained answer"))
}
