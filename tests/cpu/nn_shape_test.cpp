// The module ops' output-shape rules (lib/core/nn_shape.hpp): sizes against the formulas of
// module-ops.md and every typed error for bad options, with the op named in the message.
#include <gtest/gtest.h>

#include <string>

#include "lib/core/nn_shape.hpp"

namespace tensor::nn {
namespace {

using namespace tensor::core;

using I = std::int64_t;

template <class F>
void expect_shape_error(F&& f, const std::string& fragment) {
  try {
    f();
    ADD_FAILURE() << "no ShapeError; expected one containing \"" << fragment << "\"";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TEST(NnShape, ConvOutputShapes) {
  EXPECT_EQ(conv_output_shape<2>("conv2d", Shape{1, 4, 5, 5}, Shape{2, 2, 2, 2}, ConvOptions<2>{{2, 1}, {1, 0}, {2, 2}, 2}),
            (Shape{1, 2, 3, 3}));
  EXPECT_EQ(conv_output_shape<1>("conv1d", Shape{1, 1, 7}, Shape{1, 1, 3}, ConvOptions<1>{{2}, {1}, {3}, 1}),
            (Shape{1, 1, 2}));
  EXPECT_EQ(conv_output_shape<3>("conv3d", Shape{2, 3, 4, 5, 6}, Shape{8, 3, 2, 3, 1}, ConvOptions<3>{}),
            (Shape{2, 8, 3, 3, 6}));
  const Shape bias{8};
  EXPECT_EQ(conv_output_shape<2>("conv2d", Shape{32, 64, 56, 56}, Shape{8, 64, 3, 3}, ConvOptions<2>{{1, 1}, {1, 1}, {1, 1}, 1}, &bias),
            (Shape{32, 8, 56, 56}));
}

TEST(NnShape, ConvTransposeOutputShapes) {
  EXPECT_EQ(conv_transpose_output_shape<2>("conv_transpose2d", Shape{1, 1, 2, 2}, Shape{1, 1, 3, 3},
                                           ConvTransposeOptions<2>{{2, 2}, {1, 1}, {1, 1}, {1, 1}, 1}),
            (Shape{1, 1, 4, 4}));
  EXPECT_EQ(conv_transpose_output_shape<1>("conv_transpose1d", Shape{1, 2, 2}, Shape{2, 1, 2},
                                           ConvTransposeOptions<1>{{1}, {0}, {0}, {1}, 2}),
            (Shape{1, 2, 3}));
  EXPECT_EQ(conv_transpose_output_shape<1>("conv_transpose1d", Shape{1, 1, 2}, Shape{1, 1, 3},
                                           ConvTransposeOptions<1>{{3}, {0}, {0}, {2}, 1}),
            (Shape{1, 1, 8}));
}

TEST(NnShape, PoolOutputSizesFollowTorchCeilRule) {
  EXPECT_EQ(pool_out_size(5, 2, 2, 1, 1, true), 3);   // E8: burn would give 4
  EXPECT_EQ(pool_out_size(6, 3, 2, 0, 1, true), 3);   // E9
  EXPECT_EQ(pool_out_size(6, 3, 2, 1, 1, true), 4);   // E11
  EXPECT_EQ(pool_out_size(6, 3, 2, 0, 1, false), 2);
  EXPECT_EQ(max_pool_output_shape<2>("max_pool2d", Shape{2, 3, 6, 6}, MaxPoolOptions<2>{{3, 3}, {2, 2}, {0, 0}, {1, 1}, true}),
            (Shape{2, 3, 3, 3}));
  EXPECT_EQ(avg_pool_output_shape<1>("avg_pool1d", Shape{1, 1, 6}, AvgPoolOptions<1>{{3}, {2}, {1}, true, true}),
            (Shape{1, 1, 4}));
  EXPECT_EQ(adaptive_avg_pool_output_shape<3>("adaptive_avg_pool3d", Shape{1, 2, 3, 4, 5}, std::array<I, 3>{1, 7, 2}),
            (Shape{1, 2, 1, 7, 2}));
  EXPECT_EQ(interpolate_output_shape("interpolate", Shape{1, 2, 3, 4}, {8, 1}), (Shape{1, 2, 8, 1}));
}

TEST(NnShape, AdaptiveWindowsAndBackwardPadding) {
  EXPECT_EQ(adaptive_start(1, 5, 3), 1);
  EXPECT_EQ(adaptive_end(1, 5, 3), 4);
  EXPECT_EQ(adaptive_start(3, 3, 5), 1);
  EXPECT_EQ(adaptive_end(3, 3, 5), 3);
  EXPECT_EQ(conv_backward_padding_out(5, 2, 2, 2, 0, 1), 1);  // E3
  EXPECT_EQ(conv_backward_padding_out(6, 6, 3, 1, 1, 1), 0);
}

TEST(NnShape, ConvBadOptionsAreTypedErrorsNamingTheOp) {
  const Shape x{1, 4, 5, 5}, w{2, 4, 3, 3};
  expect_shape_error([&] { conv_output_shape<2>("conv2d", x, w, ConvOptions<2>{{0, 1}, {0, 0}, {1, 1}, 1}); },
                     "[conv2d] stride must be positive");
  expect_shape_error([&] { conv_output_shape<2>("conv2d", x, w, ConvOptions<2>{{-1, 1}, {0, 0}, {1, 1}, 1}); },
                     "[conv2d] stride must be positive");
  expect_shape_error([&] { conv_output_shape<2>("conv2d", x, w, ConvOptions<2>{{1, 1}, {-1, 0}, {1, 1}, 1}); },
                     "[conv2d] padding must not be negative");
  expect_shape_error([&] { conv_output_shape<2>("conv2d", x, w, ConvOptions<2>{{1, 1}, {0, 0}, {0, 1}, 1}); },
                     "[conv2d] dilation must be positive");
  expect_shape_error([&] { conv_output_shape<2>("conv2d", x, Shape{3, 2, 3, 3}, ConvOptions<2>{{1, 1}, {0, 0}, {1, 1}, 2}); },
                     "[conv2d] channels not divisible by groups");
  expect_shape_error([&] { conv_output_shape<2>("conv2d", Shape{1, 3, 5, 5}, Shape{2, 1, 3, 3}, ConvOptions<2>{{1, 1}, {0, 0}, {1, 1}, 2}); },
                     "[conv2d] channels not divisible by groups");
  expect_shape_error([&] { conv_output_shape<2>("conv2d", x, Shape{2, 3, 3, 3}, ConvOptions<2>{}); },
                     "[conv2d] weight channels do not match");
  expect_shape_error([&] { conv_output_shape<2>("conv2d", x, Shape{2, 4, 6, 3}, ConvOptions<2>{}); },
                     "[conv2d] kernel larger than the padded input");
  expect_shape_error([&] { conv_output_shape<2>("conv2d", x, w, ConvOptions<2>{{1, 1}, {0, 0}, {3, 1}, 1}); },
                     "[conv2d] kernel larger than the padded input");
  expect_shape_error([&] { conv_output_shape<2>("conv2d", Shape{4, 5, 5}, w, ConvOptions<2>{}); }, "[conv2d] x has the wrong rank");
  expect_shape_error([&] { conv_output_shape<2>("conv2d", x, w, ConvOptions<2>{{1, 1}, {0, 0}, {1, 1}, 0}); },
                     "[conv2d] groups must be positive");
  const Shape bad_bias{3};
  expect_shape_error([&] { conv_output_shape<2>("conv2d", x, w, ConvOptions<2>{}, &bad_bias); }, "[conv2d] bias has the wrong shape");
  expect_shape_error([&] { conv_output_shape<1>("conv1d", Shape{1, 1, 2}, Shape{1, 1, 3}, ConvOptions<1>{}); },
                     "[conv1d] kernel larger than the padded input");
}

TEST(NnShape, ConvTransposeBadOptions) {
  const Shape x{1, 2, 3, 3}, w{2, 1, 3, 3};
  expect_shape_error([&] { conv_transpose_output_shape<2>("conv_transpose2d", x, w, ConvTransposeOptions<2>{{2, 2}, {0, 0}, {2, 0}, {1, 1}, 1}); },
                     "[conv_transpose2d] padding_out too large");
  expect_shape_error([&] { conv_transpose_output_shape<2>("conv_transpose2d", x, w, ConvTransposeOptions<2>{{1, 1}, {0, 0}, {1, 0}, {1, 1}, 1}); },
                     "[conv_transpose2d] padding_out too large");
  expect_shape_error([&] { conv_transpose_output_shape<2>("conv_transpose2d", Shape{1, 3, 3, 3}, Shape{3, 1, 3, 3}, ConvTransposeOptions<2>{{1, 1}, {0, 0}, {0, 0}, {1, 1}, 2}); },
                     "[conv_transpose2d] channels not divisible by groups");
  expect_shape_error([&] { conv_transpose_output_shape<1>("conv_transpose1d", Shape{1, 1, 1}, Shape{1, 1, 1}, ConvTransposeOptions<1>{{1}, {1}, {0}, {1}, 1}); },
                     "[conv_transpose1d] output size must be positive");
  expect_shape_error([&] { conv_transpose_output_shape<2>("conv_transpose2d", x, w, ConvTransposeOptions<2>{{0, 1}, {0, 0}, {0, 0}, {1, 1}, 1}); },
                     "[conv_transpose2d] stride must be positive");
  expect_shape_error([&] { conv_transpose_output_shape<2>("conv_transpose2d", x, Shape{3, 1, 3, 3}, ConvTransposeOptions<2>{}); },
                     "[conv_transpose2d] weight channels do not match");
}

TEST(NnShape, PoolBadOptions) {
  const Shape x{1, 1, 5, 5};
  expect_shape_error([&] { max_pool_output_shape<2>("max_pool2d", x, MaxPoolOptions<2>{{2, 2}, {0, 1}, {0, 0}, {1, 1}, false}); },
                     "[max_pool2d] stride must be positive");
  expect_shape_error([&] { max_pool_output_shape<2>("max_pool2d", x, MaxPoolOptions<2>{{2, 2}, {1, 1}, {2, 0}, {1, 1}, false}); },
                     "[max_pool2d] padding larger than half the dilated kernel");
  expect_shape_error([&] { max_pool_output_shape<2>("max_pool2d", x, MaxPoolOptions<2>{{6, 2}, {1, 1}, {0, 0}, {1, 1}, false}); },
                     "[max_pool2d] kernel larger than the padded input");
  expect_shape_error([&] { max_pool_output_shape<2>("max_pool2d", x, MaxPoolOptions<2>{{0, 2}, {1, 1}, {0, 0}, {1, 1}, false}); },
                     "[max_pool2d] kernel_size must be positive");
  expect_shape_error([&] { avg_pool_output_shape<1>("avg_pool1d", Shape{1, 1, 5}, AvgPoolOptions<1>{{3}, {1}, {2}, true, false}); },
                     "[avg_pool1d] padding larger than half the kernel");
  expect_shape_error([&] { avg_pool_output_shape<2>("avg_pool2d", Shape{1, 5, 5}, AvgPoolOptions<2>{}); },
                     "[avg_pool2d] x has the wrong rank");
  expect_shape_error([&] { adaptive_avg_pool_output_shape<2>("adaptive_avg_pool2d", x, std::array<I, 2>{0, 2}); },
                     "[adaptive_avg_pool2d] output size must be positive");
  expect_shape_error([&] { adaptive_avg_pool_output_shape<1>("adaptive_avg_pool1d", Shape{1, 1, 0}, std::array<I, 1>{2}); },
                     "[adaptive_avg_pool1d] empty spatial input");
  expect_shape_error([&] { interpolate_output_shape("interpolate", x, {3, 0}); }, "[interpolate] output size must be positive");
  expect_shape_error([&] { interpolate_output_shape("interpolate", Shape{1, 5, 5}, {3, 3}); }, "[interpolate] x has the wrong rank");
}

TEST(NnShape, AttentionShapesAndBadMasks) {
  const Shape q{2, 3, 5, 4}, k{2, 3, 7, 4}, v{2, 3, 7, 6};
  const Shape m1{1, 1, 5, 7}, m2{2, 1, 5, 7}, bad{2, 3, 7, 5};
  EXPECT_EQ(attention_output_shape("attention", q, k, v, &m1, &m2, {}), (Shape{2, 3, 5, 6}));
  expect_shape_error([&] { attention_output_shape("attention", q, k, v, &bad, nullptr, {}); }, "[attention] mask has the wrong shape");
  expect_shape_error([&] { attention_output_shape("attention", q, k, v, nullptr, &bad, {}); }, "[attention] attn_bias has the wrong shape");
  expect_shape_error([&] { attention_output_shape("attention", q, Shape{2, 3, 7, 5}, v, nullptr, nullptr, {}); },
                     "[attention] q, k, v shapes do not agree");
  AttentionModuleOptions o;
  o.softcap = 0.0;
  expect_shape_error([&] { attention_output_shape("attention", q, k, v, nullptr, nullptr, o); }, "[attention] softcap must be positive");
}

TEST(NnShape, DeformConvAndUnfoldShapes) {
  const Shape x{1, 4, 5, 5}, w{6, 2, 3, 3}, off{1, 2 * 2 * 9, 3, 3}, mask{1, 2 * 9, 3, 3};
  DeformConvOptions<2> o;
  o.weight_groups = 2;
  o.offset_groups = 2;
  EXPECT_EQ(deform_conv2d_output_shape("deform_conv2d", x, off, w, &mask, nullptr, o), (Shape{1, 6, 3, 3}));
  const Shape bad_off{1, 18, 3, 3};
  expect_shape_error([&] { deform_conv2d_output_shape("deform_conv2d", x, bad_off, w, nullptr, nullptr, o); },
                     "[deform_conv2d] offset has the wrong shape");
  EXPECT_EQ(unfold4d_output_shape("unfold4d", Shape{1, 2, 3, 3}, {2, 2}, UnfoldOptions{}), (Shape{1, 8, 4}));
  EXPECT_EQ(fold4d_output_shape("fold4d", Shape{1, 8, 4}, {3, 3}, {2, 2}, UnfoldOptions{}), (Shape{1, 2, 3, 3}));
  expect_shape_error([&] { fold4d_output_shape("fold4d", Shape{1, 7, 4}, {3, 3}, {2, 2}, UnfoldOptions{}); },
                     "[fold4d] channels not divisible by the kernel size");
  expect_shape_error([&] { fold4d_output_shape("fold4d", Shape{1, 8, 5}, {3, 3}, {2, 2}, UnfoldOptions{}); },
                     "[fold4d] block count does not match the output size");
}

}  // namespace
}  // namespace tensor::nn
