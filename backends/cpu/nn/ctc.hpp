// CPU ctc_loss (per-sample negative log-likelihood) and its exact gradient with respect to
// the log-probabilities, by the alpha/beta recursions in f64 (module-ops.md §2.14, §6.6).
#pragma once

#include <cstddef>
#include <cstdint>

namespace tensor::cpu::nn {

struct CtcGeom {
  std::size_t time = 0, batch = 0, classes = 0, max_target = 0;  // log_probs [T, N, C], targets [N, S]
  std::int64_t blank = 0;
};

// Checks the integer inputs (IndexError / ShapeError "[ctc_loss] ..."): blank and every used
// target in [0, C) and no target equal to blank, 0 <= input_lengths <= T, 0 <= target_lengths <= S.
// Errors name `op`: the entry's op (ctc_loss or ctc_loss_backward), the one the user called.
void ctc_validate(const char* op, const CtcGeom& g, const std::int64_t* targets, const std::int64_t* input_lengths,
                  const std::int64_t* target_lengths);

// The kernels trust their inputs: the entries run ctc_validate first.
// loss [N]; an impossible alignment gives +inf.
void ctc_loss_forward(const CtcGeom& g, const float* log_probs, const std::int64_t* targets,
                      const std::int64_t* input_lengths, const std::int64_t* target_lengths, float* loss);
void ctc_loss_forward(const CtcGeom& g, const double* log_probs, const std::int64_t* targets,
                      const std::int64_t* input_lengths, const std::int64_t* target_lengths, double* loss);
// dlog_probs [T, N, C] = dloss[n] · d loss_n / d log_probs (= -posterior); 0 for frames
// t >= input_lengths[n] and for samples with an infinite loss.
void ctc_loss_backward(const CtcGeom& g, const float* log_probs, const std::int64_t* targets,
                       const std::int64_t* input_lengths, const std::int64_t* target_lengths, const float* dloss,
                       float* dlog_probs);
void ctc_loss_backward(const CtcGeom& g, const double* log_probs, const std::int64_t* targets,
                       const std::int64_t* input_lengths, const std::int64_t* target_lengths, const double* dloss,
                       double* dlog_probs);

}  // namespace tensor::cpu::nn
