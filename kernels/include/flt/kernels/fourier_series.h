#pragma once
// The scalar numerics of Fourier attention, shared by the CPU kernel, the CUDA kernel and the
// composite reference (plain C++: no LibTorch, so nvcc compiles it without LibTorch).
//
//   s(x) = sin(x) / x  (the unnormalised sinc, s(0) = 1)
//   c(x) = d/dx log|s(x)| = cot x - 1/x
//
// Near x = 0 both are evaluated by their Taylor series in x^2: the closed forms lose all accuracy
// there (sin x / x from the trig identity cancels, and cot x - 1/x cancels catastrophically:
// in float, x = 1e-4 gives 0 instead of -3.3e-5). Beyond the threshold the closed forms are used.

#if defined(__CUDACC__)
#define FLT_HOST_DEVICE __host__ __device__
#else
#define FLT_HOST_DEVICE
#endif

namespace flt::kernels::fourier {

/// Per-precision constants: |x| below `kSmall` uses the series; the series are truncated where the
/// next term is below the type's rounding error at |x| = kSmall (float: 1/13! and (1/pi)^18;
/// double: 0.5^16/17! and (0.5/pi)^26). `kRenormEvery`: dimensions multiplied into a running
/// product of factors in [1e-8, 1] (float) / [1e-17, 1] (double) before its exponent is moved out,
/// so the product can neither underflow nor overflow.
template <typename T>
struct Precision;
template <>
struct Precision<float> {
  static constexpr float kSmall = 1.0f;
  static constexpr int kRenormEvery = 4;
};
template <>
struct Precision<double> {
  static constexpr double kSmall = 0.5;
  static constexpr int kRenormEvery = 8;
};

/// c0 + x (c1 + x (c2 + ...)): Horner's scheme, coefficients from the lowest power up.
template <typename T>
FLT_HOST_DEVICE inline T horner(T, T c0) {
  return c0;
}
template <typename T, typename... Higher>
FLT_HOST_DEVICE inline T horner(T x, T c0, Higher... higher) {
  return c0 + x * horner(x, higher...);
}

/// s(x) for x^2 = x2 < kSmall^2: sum_n (-1)^n x^(2n) / (2n+1)!.
template <typename T>
FLT_HOST_DEVICE inline T sinc_series(T x2) {
  if constexpr (sizeof(T) == sizeof(float)) {
    return horner(x2, T(1), T(-1.0 / 6), T(1.0 / 120), T(-1.0 / 5040), T(1.0 / 362880),
                  T(-1.0 / 39916800));
  } else {
    return horner(x2, T(1), T(-0.16666666666666666), T(0.0083333333333333332),
                  T(-0.00019841269841269841), T(2.7557319223985893e-06), T(-2.505210838544172e-08),
                  T(1.6059043836821613e-10), T(-7.6471637318198164e-13));
  }
}

/// c(x) = cot x - 1/x for x^2 = x2 < kSmall^2: x * sum_n C_n x^(2n), C_n = -2 zeta(2n+2) /
/// pi^(2n+2) (-1/3, -1/45, -2/945, ...; obtained as the series quotient s'(x) / s(x)).
template <typename T>
FLT_HOST_DEVICE inline T cot_minus_inv_series(T x, T x2) {
  if constexpr (sizeof(T) == sizeof(float)) {
    return x * horner(x2, T(-1.0 / 3), T(-1.0 / 45), T(-2.0 / 945), T(-1.0 / 4725),
                      T(-2.1377799155576935e-05), T(-2.1644042808063972e-06),
                      T(-2.1925947851873778e-07), T(-2.2214608789979678e-08),
                      T(-2.2507846516808994e-09));
  } else {
    return x * horner(x2, T(-0.33333333333333331), T(-0.022222222222222223),
                      T(-0.0021164021164021165), T(-0.00021164021164021165),
                      T(-2.1377799155576935e-05), T(-2.1644042808063972e-06),
                      T(-2.1925947851873778e-07), T(-2.2214608789979678e-08),
                      T(-2.2507846516808994e-09), T(-2.2805151204592183e-10),
                      T(-2.3106432599002624e-11), T(-2.3411706819824882e-12),
                      T(-2.3721017400233653e-13));
  }
}

/// How phi acts on the factors s_d of one (query, key) pair; the weight is prod_d phi(s_d).
/// kPowerEven: s^p, p even (|s|^p, never negative).  kPowerOdd: s^p, p odd (carries the sign).
/// kAbs: |s|^p.  kRelu: max(s, 0)^p.  (Sigmoid has no product form: composite path only.)
enum class FactorMode : int { kPowerEven = 0, kPowerOdd = 1, kAbs = 2, kRelu = 3 };

}  // namespace flt::kernels::fourier
