//! Runtime dispatch to AVX2 + FMA code for the numeric loops (the encoder's element-wise
//! passes, quantised vector screening), without building the whole crate for one CPU;
//! and the one cache hint the scattered reads use.

/// Compiles `$body` for the baseline target and for AVX2 + FMA and calls the best one
/// the CPU has.
macro_rules! multiversion {
    ($(#[$doc:meta])* $vis:vis fn $name:ident($($arg:ident: $ty:ty),*) $(-> $ret:ty)? $body:block) => {
        $(#[$doc])*
        $vis fn $name($($arg: $ty),*) $(-> $ret)? {
            #[inline(always)]
            fn generic($($arg: $ty),*) $(-> $ret)? $body

            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx2,fma")]
                unsafe fn avx2($($arg: $ty),*) $(-> $ret)? {
                    generic($($arg),*)
                }
                if $crate::simd::has_avx2_fma() {
                    // SAFETY: the CPU has the features `avx2` was compiled for.
                    return unsafe { avx2($($arg),*) };
                }
            }
            generic($($arg),*)
        }
    };
}
pub(crate) use multiversion;

/// Asks for the cache line at `item` ahead of its use, into every cache level: a hint,
/// with no effect on other targets.
#[inline(always)]
pub(crate) fn prefetch<T>(item: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch reads nothing, and SSE is part of x86_64.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>((item as *const T).cast())
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = item;
}

#[cfg(target_arch = "x86_64")]
pub(crate) fn has_avx2_fma() -> bool {
    use std::sync::OnceLock;
    static HAS: OnceLock<bool> = OnceLock::new();
    *HAS.get_or_init(|| is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma"))
}
