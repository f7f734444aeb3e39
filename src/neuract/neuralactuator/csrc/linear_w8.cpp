// neuract::linear_w8 -- a linear layer with int8 weights for the CPU (AVX2 + FMA).
//
//   y = x @ (w * scale[:, None]).T + bias      x: (B, K) float32, w: (N, K) int8,
//                                             scale, bias: (N,) float32 -> y: (B, N) float32
//
// Each row of x is quantized to int16 with its own scale (max |x| -> qmax, qmax = 16383 for
// K <= 8192); the int16 x int8 products are summed exactly (int32 lanes, vpmaddwd, then the
// lanes in double), so the only rounding besides the weights' own is x's 15-bit
// quantization and the final float32 scaling. A row with a NaN or an infinity gives a NaN
// row; a row whose largest |x| is below 1e-30 is treated as zero. At batch 1 the call reads
// the weights once, a quarter of the bytes of a float32 matrix-vector product, which is what
// bounds that product on a CPU. neuract.neuralactuator.int8op builds, loads and documents
// this file; linear_w8_reference there is the same arithmetic in torch.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/library.h>
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#ifndef NEURACT_SOURCE_HASH
#define NEURACT_SOURCE_HASH "unknown"
#endif

namespace {

int32_t qmax_for(int64_t K) {
  // each int32 lane sums ceil(K / 8) products of at most qmax * 128 (int8 reaches -128)
  const int64_t per_lane = (K + 7) / 8;
  const int64_t limit = INT32_MAX / (128 * std::max<int64_t>(per_lane, 1));
  return static_cast<int32_t>(std::min<int64_t>(16383, limit));
}

constexpr float kTiny = 1e-30f;  // rows below this magnitude count as zero

// quantizes one row of x to int16; returns its scale, or NaN when the row is not finite
float quantize_row(const float* xr, int16_t* xq, int64_t K, int32_t qmax) {
  float m = 0.f;
  bool finite = true;
  for (int64_t k = 0; k < K; ++k) {
    finite = finite && std::isfinite(xr[k]);
    m = std::max(m, std::fabs(xr[k]));
  }
  if (!finite) {
    std::fill(xq, xq + K, int16_t(0));
    return std::numeric_limits<float>::quiet_NaN();
  }
  if (m < kTiny) {
    std::fill(xq, xq + K, int16_t(0));
    return 1.f;
  }
  const float sx = m / static_cast<float>(qmax);
  const float inv = 1.f / sx;
  const float q = static_cast<float>(qmax);
  for (int64_t k = 0; k < K; ++k)
    xq[k] = static_cast<int16_t>(std::nearbyint(std::min(q, std::max(-q, xr[k] * inv))));
  return sx;
}

// the four accumulators' lane sums, exactly (in double)
inline __m256d lane_sums(const __m256i* a) {
  __m256d s[4];
  for (int j = 0; j < 4; ++j)
    s[j] = _mm256_add_pd(_mm256_cvtepi32_pd(_mm256_castsi256_si128(a[j])),
                         _mm256_cvtepi32_pd(_mm256_extracti128_si256(a[j], 1)));
  const __m256d h01 = _mm256_hadd_pd(s[0], s[1]);  // 0a+0b, 1a+1b, 0c+0d, 1c+1d
  const __m256d h23 = _mm256_hadd_pd(s[2], s[3]);
  const __m256d lo = _mm256_permute2f128_pd(h01, h23, 0x20);
  const __m256d hi = _mm256_permute2f128_pd(h01, h23, 0x31);
  return _mm256_add_pd(lo, hi);
}

// R rows of x (already quantized: xq[r * K ...], scales sx[r]) against all N weight rows;
// each block of 4 weight rows is widened to int16 once per 16 inputs and used for all R rows
template <int R>
void rows(const int16_t* xq, const float* sx, const int8_t* w, const float* scale,
          const float* bias, float* y, int64_t K, int64_t N) {
  const int64_t K16 = K - K % 16;
  int64_t n = 0;
  for (; n + 4 <= N; n += 4) {
    const int8_t* w0 = w + n * K;
    __m256i acc[R][4];
    for (int r = 0; r < R; ++r)
      for (int j = 0; j < 4; ++j) acc[r][j] = _mm256_setzero_si256();
    for (int64_t k = 0; k < K16; k += 16) {
      __m256i wv[4];
      for (int j = 0; j < 4; ++j)
        wv[j] = _mm256_cvtepi8_epi16(
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(w0 + j * K + k)));
      for (int r = 0; r < R; ++r) {
        const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + r * K + k));
        for (int j = 0; j < 4; ++j)
          acc[r][j] = _mm256_add_epi32(acc[r][j], _mm256_madd_epi16(xv, wv[j]));
      }
    }
    for (int r = 0; r < R; ++r) {
      __m256d sum = lane_sums(acc[r]);
      if (K16 < K) {  // the last K % 16 inputs
        alignas(32) double tail[4];
        for (int j = 0; j < 4; ++j) {
          int32_t t = 0;
          for (int64_t k = K16; k < K; ++k) t += int32_t(xq[r * K + k]) * int32_t(w0[j * K + k]);
          tail[j] = static_cast<double>(t);
        }
        sum = _mm256_add_pd(sum, _mm256_load_pd(tail));
      }
      const __m128 sc = _mm_mul_ps(_mm_loadu_ps(scale + n), _mm_set1_ps(sx[r]));
      _mm_storeu_ps(y + r * N + n, _mm_fmadd_ps(_mm256_cvtpd_ps(sum), sc, _mm_loadu_ps(bias + n)));
    }
  }
  for (; n < N; ++n) {
    for (int r = 0; r < R; ++r) {
      int64_t t = 0;
      for (int64_t k = 0; k < K; ++k) t += int64_t(xq[r * K + k]) * int64_t(w[n * K + k]);
      y[r * N + n] = std::fma(static_cast<float>(static_cast<double>(t)), scale[n] * sx[r], bias[n]);
    }
  }
}

at::Tensor linear_w8(const at::Tensor& x, const at::Tensor& w, const at::Tensor& scale,
                     const at::Tensor& bias) {
  TORCH_CHECK(x.dim() == 2 && x.scalar_type() == at::kFloat && x.device().is_cpu(),
              "linear_w8: x must be a (B, K) float32 CPU tensor; got ", x.sizes(), " ",
              x.scalar_type());
  TORCH_CHECK(w.dim() == 2 && w.scalar_type() == at::kChar && w.size(1) == x.size(1),
              "linear_w8: w must be an (N, K) int8 tensor with K = ", x.size(1), "; got ",
              w.sizes(), " ", w.scalar_type());
  const int64_t B = x.size(0), K = x.size(1), N = w.size(0);
  TORCH_CHECK(scale.scalar_type() == at::kFloat && scale.numel() == N &&
                  bias.scalar_type() == at::kFloat && bias.numel() == N,
              "linear_w8: scale and bias must be float32 with N = ", N, " elements");
  const auto xc = x.contiguous();
  const auto wc = w.contiguous();
  const auto sc = scale.contiguous();
  const auto bc = bias.contiguous();
  auto out = at::empty({B, N}, x.options());
  const int32_t qmax = qmax_for(K);
  const float* xp = xc.data_ptr<float>();
  const int8_t* wp = wc.data_ptr<int8_t>();
  const float* sp = sc.data_ptr<float>();
  const float* bp = bc.data_ptr<float>();
  float* yp = out.data_ptr<float>();
  at::parallel_for(0, B, 4, [&](int64_t begin, int64_t end) {
    std::vector<int16_t> xq(static_cast<size_t>(2 * K));
    float sx[2];
    int64_t b = begin;
    for (; b + 2 <= end; b += 2) {
      for (int r = 0; r < 2; ++r) sx[r] = quantize_row(xp + (b + r) * K, xq.data() + r * K, K, qmax);
      rows<2>(xq.data(), sx, wp, sp, bp, yp + b * N, K, N);
    }
    if (b < end) {
      sx[0] = quantize_row(xp + b * K, xq.data(), K, qmax);
      rows<1>(xq.data(), sx, wp, sp, bp, yp + b * N, K, N);
    }
  });
  return out;
}

std::string linear_w8_source() { return NEURACT_SOURCE_HASH; }

}  // namespace

TORCH_LIBRARY_FRAGMENT(neuract, m) {
  m.def("linear_w8(Tensor x, Tensor w, Tensor scale, Tensor bias) -> Tensor");
  // the SHA-256 prefix of this file as built (int8op.load_op compares it with aot.json)
  m.def("linear_w8_source() -> str", &linear_w8_source);
}

TORCH_LIBRARY_IMPL(neuract, CPU, m) { m.impl("linear_w8", linear_w8); }
