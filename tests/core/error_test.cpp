// Tests of costate::Error and the always-on check macros (core/error.hpp):
// a failed check throws costate::Error whose text holds the condition, both
// operands printed with 16 significant digits, the caller's message, and the
// source location; passing checks throw nothing and never evaluate the message.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>

#include "costate/core/error.hpp"

namespace {

using costate::Error;

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// ------------------------------------------------------------ format_value

TEST(FormatValue, DoublesUseSixteenSignificantDigits) {
  EXPECT_EQ(costate::detail::format_value(1.0 / 3.0), "0.3333333333333333");
  EXPECT_EQ(costate::detail::format_value(2.0 / 3.0), "0.6666666666666666");
  // 16 significant digits of 0.1 are 0.1000000000000000; the default float
  // format drops the trailing zeros.
  EXPECT_EQ(costate::detail::format_value(0.1), "0.1");
  EXPECT_EQ(costate::detail::format_value(1e20 / 3.0), "3.333333333333333e+19");
  EXPECT_EQ(costate::detail::format_value(-2.5e-300), "-2.5e-300");
  // A float is printed with the same precision (its own binary value shows).
  EXPECT_EQ(costate::detail::format_value(0.1f), "0.1000000014901161");
}

TEST(FormatValue, NonFloatingValues) {
  EXPECT_EQ(costate::detail::format_value(42), "42");
  EXPECT_EQ(costate::detail::format_value(std::int64_t{-7}), "-7");
  EXPECT_EQ(costate::detail::format_value(true), "true");
  EXPECT_EQ(costate::detail::format_value(false), "false");
  EXPECT_EQ(costate::detail::format_value(std::string("abc")), "abc");
}

// ------------------------------------------------------------ Error itself

TEST(Error, PlainErrorHasNoLocation) {
  const Error e("something went wrong");
  EXPECT_STREQ(e.what(), "something went wrong");
  EXPECT_TRUE(e.condition().empty());
  EXPECT_TRUE(e.file().empty());
  EXPECT_EQ(e.line(), 0);
  // It is a std::runtime_error, so generic handlers catch it.
  const std::runtime_error& base = e;
  EXPECT_STREQ(base.what(), "something went wrong");
}

// ------------------------------------------------------------ COSTATE_CHECK

TEST(Check, FailureCarriesConditionMessageFileAndLine) {
  const int n = -3;
  int expected_line = 0;
  try {
    expected_line = __LINE__ + 1;
    COSTATE_CHECK(n > 0, "n must be positive, got n = " << n);
    FAIL() << "COSTATE_CHECK did not throw";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_TRUE(contains(what, "n must be positive, got n = -3")) << what;
    EXPECT_TRUE(contains(what, "n > 0")) << what;
    EXPECT_TRUE(contains(what, __FILE__)) << what;
    EXPECT_TRUE(contains(what, std::string(__FILE__) + ":" + std::to_string(expected_line)))
        << what;
    EXPECT_EQ(e.condition(), "n > 0");
    EXPECT_EQ(e.file(), __FILE__);
    EXPECT_EQ(e.line(), expected_line);
    // The exact layout: message, then the bracketed check report.
    EXPECT_EQ(what, "n must be positive, got n = -3 [check failed: n > 0 at " +
                        std::string(__FILE__) + ":" + std::to_string(expected_line) + "]");
  }
}

TEST(Check, EmptyMessageStillReportsTheCondition) {
  try {
    COSTATE_CHECK(1 + 1 == 3, "");
    FAIL() << "COSTATE_CHECK did not throw";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_TRUE(contains(what, "check failed")) << what;
    EXPECT_TRUE(contains(what, "1 + 1 == 3")) << what;
    EXPECT_EQ(e.condition(), "1 + 1 == 3");
  }
}

TEST(Check, PassingCheckDoesNotThrowNorEvaluateTheMessage) {
  int message_evaluations = 0;
  auto expensive = [&] {
    ++message_evaluations;
    return std::string("never built");
  };
  EXPECT_NO_THROW(COSTATE_CHECK(2 > 1, expensive()));
  EXPECT_NO_THROW(COSTATE_CHECK_EQ(3, 3, expensive()));
  EXPECT_NO_THROW(COSTATE_CHECK_NE(3, 4, expensive()));
  EXPECT_NO_THROW(COSTATE_CHECK_LT(3.0, 4.0, expensive()));
  EXPECT_NO_THROW(COSTATE_CHECK_LE(4.0, 4.0, expensive()));
  EXPECT_NO_THROW(COSTATE_CHECK_GT(0.5, 0.25, expensive()));
  EXPECT_NO_THROW(COSTATE_CHECK_GE(0.5, 0.5, expensive()));
  EXPECT_EQ(message_evaluations, 0);
}

TEST(Check, FailingCheckEvaluatesTheMessageOnce) {
  int message_evaluations = 0;
  auto counted = [&] {
    ++message_evaluations;
    return std::string("counted");
  };
  EXPECT_THROW(COSTATE_CHECK(false, counted()), Error);
  EXPECT_EQ(message_evaluations, 1);
}

// ----------------------------------------------------- comparison checks

TEST(CheckOp, GreaterThanPrintsBothOperandsWithSixteenDigits) {
  const double third = 1.0 / 3.0;
  const double half = 0.5;
  int expected_line = 0;
  try {
    expected_line = __LINE__ + 1;
    COSTATE_CHECK_GT(third, half, "third must exceed half");
    FAIL() << "COSTATE_CHECK_GT did not throw";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_EQ(e.condition(), "third > half");
    EXPECT_EQ(e.file(), __FILE__);
    EXPECT_EQ(e.line(), expected_line);
    EXPECT_TRUE(contains(what, "third must exceed half")) << what;
    EXPECT_TRUE(contains(what, "third > half")) << what;
    EXPECT_TRUE(contains(what, "third = 0.3333333333333333")) << what;
    EXPECT_TRUE(contains(what, "half = 0.5")) << what;
    EXPECT_TRUE(contains(what, std::string(__FILE__) + ":" + std::to_string(expected_line)))
        << what;
    EXPECT_EQ(what, "third must exceed half [check failed: third > half with third = "
                    "0.3333333333333333, half = 0.5 at " +
                        std::string(__FILE__) + ":" + std::to_string(expected_line) + "]");
  }
}

TEST(CheckOp, ValuesThatNeedAllSixteenDigits) {
  // 0.1 + 0.2 differs from 0.3 only in the 17th digit: 16 digits show
  // 0.3000000000000000 which the default format prints as 0.3. The values
  // printed must be the exact operands, so use ones that need 16 digits.
  const double a = 2.0 / 3.0;
  const double b = 1e20 / 3.0;
  try {
    COSTATE_CHECK_EQ(a, b, "");
    FAIL() << "COSTATE_CHECK_EQ did not throw";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_TRUE(contains(what, "a = 0.6666666666666666, b = 3.333333333333333e+19")) << what;
  }
}

TEST(CheckOp, EachComparisonThrowsWhenFalse) {
  const int two = 2;
  const int three = 3;
  auto condition_of = [](auto&& f) -> std::string {
    try {
      f();
    } catch (const Error& e) {
      return e.condition();
    }
    return "<no throw>";
  };
  EXPECT_EQ(condition_of([&] { COSTATE_CHECK_EQ(two, three, ""); }), "two == three");
  EXPECT_EQ(condition_of([&] { COSTATE_CHECK_NE(two, two, ""); }), "two != two");
  EXPECT_EQ(condition_of([&] { COSTATE_CHECK_LT(three, two, ""); }), "three < two");
  EXPECT_EQ(condition_of([&] { COSTATE_CHECK_LE(three, two, ""); }), "three <= two");
  EXPECT_EQ(condition_of([&] { COSTATE_CHECK_GT(two, three, ""); }), "two > three");
  EXPECT_EQ(condition_of([&] { COSTATE_CHECK_GE(two, three, ""); }), "two >= three");
}

TEST(CheckOp, IntegerAndBoolOperandsArePrinted) {
  const std::size_t got = 7;
  const std::size_t want = 9;
  try {
    COSTATE_CHECK_EQ(got, want, "size mismatch");
    FAIL();
  } catch (const Error& e) {
    EXPECT_TRUE(contains(e.what(), "got = 7, want = 9")) << e.what();
  }
  const bool flag = false;
  try {
    COSTATE_CHECK_EQ(flag, true, "");
    FAIL();
  } catch (const Error& e) {
    EXPECT_TRUE(contains(e.what(), "flag = false, true = true")) << e.what();
  }
}

TEST(CheckOp, NaNFailsEveryOrderingCheckAndIsPrinted) {
  const double x = std::numeric_limits<double>::quiet_NaN();
  const double zero = 0.0;
  EXPECT_THROW(COSTATE_CHECK_GT(x, zero, ""), Error);
  EXPECT_THROW(COSTATE_CHECK_LE(x, zero, ""), Error);
  EXPECT_THROW(COSTATE_CHECK_EQ(x, x, ""), Error);
  try {
    COSTATE_CHECK_GE(x, zero, "");
    FAIL();
  } catch (const Error& e) {
    EXPECT_TRUE(contains(e.what(), "x = nan")) << e.what();
  }
}

TEST(CheckOp, OperandsAreEvaluatedExactlyOnce) {
  int calls = 0;
  auto next = [&] { return ++calls; };
  EXPECT_NO_THROW(COSTATE_CHECK_GE(next(), 1, ""));
  EXPECT_EQ(calls, 1);
  try {
    COSTATE_CHECK_GT(next(), 10, "");
    FAIL();
  } catch (const Error& e) {
    // Printed value is the one that was compared, not a re-evaluation.
    EXPECT_TRUE(contains(e.what(), "next() = 2, 10 = 10")) << e.what();
  }
  EXPECT_EQ(calls, 2);
}

// ------------------------------------------------ messages for users

TEST(UserMessage, RemovesEveryCheckReportEvenInsideWrappedMessages) {
  std::string inner;
  try {
    COSTATE_CHECK(1 > 2, "model.equations: the name 'x' is used twice");
  } catch (const Error& e) {
    inner = e.what();
  }
  ASSERT_TRUE(contains(inner, "[check failed: 1 > 2 at ")) << inner;
  EXPECT_EQ(costate::detail::user_message(inner), "model.equations: the name 'x' is used twice");
  const std::string wrapped = "input.yaml: cannot build the model (" + inner + "); check it";
  EXPECT_EQ(costate::detail::user_message(wrapped),
            "input.yaml: cannot build the model (model.equations: the name 'x' is used twice); "
            "check it");
  // A condition with brackets of its own: the report ends at ":<line>]".
  const std::string indexed = "bad value [check failed: v[i] > 0 with v[i] = -1 at /src/a.cpp:12]";
  EXPECT_EQ(costate::detail::user_message(indexed), "bad value");
  // A check without a message says only that an internal check failed.
  std::string bare;
  try {
    COSTATE_CHECK(1 + 1 == 3, "");
  } catch (const Error& e) {
    bare = e.what();
  }
  EXPECT_EQ(costate::detail::user_message(bare),
            "an internal check failed (run with --debug for details)");
  EXPECT_EQ(costate::detail::user_message("plain message"), "plain message");
}

}  // namespace
