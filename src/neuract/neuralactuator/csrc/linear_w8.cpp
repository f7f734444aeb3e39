// neuract::linear_w8 -- a linear layer with int8 weights for the CPU (AVX2 + FMA).
//
//   y = x @ (w * scale[:, None]).T + bias      x: (B, K) float32, w: (N, K) int8,
//                                             scale, bias: (N,) float32 -> y: (B, N) float32
//
// Each row of x is quantized to int16 with its own scale (max |x| -> qmax, qmax = 16383 for
// K <= 8256); the int16 x int8 products are summed exactly in int32 (vpmaddwd), so the only
// rounding besides the weights' own is x's 15-bit quantization. At batch 1 the call reads
// the weights once, a quarter of the bytes of a float32 matrix-vector product, which is
// what bounds that product on a CPU. neuract.neuralactuator.int8op builds, loads and
// documents this file; linear_w8_reference there is the same arithmetic in torch.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/library.h>
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace {

int32_t qmax_for(int64_t K) {
  // each int32 lane sums ceil(K / 8) products of at most qmax * 127
  const int64_t per_lane = (K + 7) / 8;
  const int64_t limit = INT32_MAX / (127 * std::max<int64_t>(per_lane, 1));
  return static_cast<int32_t>(std::min<int64_t>(16383, limit));
}

// quantizes one row of x to int16; returns its scale
float quantize_row(const float* xr, int16_t* xq, int64_t K, int32_t qmax) {
  float m = 0.f;
  for (int64_t k = 0; k < K; ++k) m = std::max(m, std::fabs(xr[k]));
  const float sx = m > 0.f ? m / static_cast<float>(qmax) : 1.f;
  const float inv = 1.f / sx;
  for (int64_t k = 0; k < K; ++k) xq[k] = static_cast<int16_t>(std::nearbyint(xr[k] * inv));
  return sx;
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
      // horizontal sums in float (the lanes' int32 sums could overflow when added together)
      const __m256 f01 = _mm256_hadd_ps(_mm256_cvtepi32_ps(acc[r][0]), _mm256_cvtepi32_ps(acc[r][1]));
      const __m256 f23 = _mm256_hadd_ps(_mm256_cvtepi32_ps(acc[r][2]), _mm256_cvtepi32_ps(acc[r][3]));
      const __m256 s = _mm256_hadd_ps(f01, f23);
      __m128 sum = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
      if (K16 < K) {
        float tail[4];
        for (int j = 0; j < 4; ++j) {
          int32_t t = 0;
          for (int64_t k = K16; k < K; ++k) t += int32_t(xq[r * K + k]) * int32_t(w0[j * K + k]);
          tail[j] = static_cast<float>(t);
        }
        sum = _mm_add_ps(sum, _mm_loadu_ps(tail));
      }
      const __m128 sc = _mm_mul_ps(_mm_loadu_ps(scale + n), _mm_set1_ps(sx[r]));
      _mm_storeu_ps(y + r * N + n, _mm_fmadd_ps(sum, sc, _mm_loadu_ps(bias + n)));
    }
  }
  for (; n < N; ++n) {
    for (int r = 0; r < R; ++r) {
      int64_t t = 0;
      for (int64_t k = 0; k < K; ++k) t += int64_t(xq[r * K + k]) * int64_t(w[n * K + k]);
      y[r * N + n] = std::fma(static_cast<float>(t), scale[n] * sx[r], bias[n]);
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

}  // namespace

TORCH_LIBRARY(neuract, m) {
  m.def("linear_w8(Tensor x, Tensor w, Tensor scale, Tensor bias) -> Tensor");
}

TORCH_LIBRARY_IMPL(neuract, CPU, m) { m.impl("linear_w8", linear_w8); }
