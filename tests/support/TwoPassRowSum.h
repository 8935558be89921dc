// A test operator whose call runs two kernels (Operator::program): y[r] = sum_c x[r, c] as a
// split reduction. Step 0 (rowsum_partials) sums each bc-column chunk of each br-row block
// into an f32 intermediate partials[S * Rp] (S = ceil(C / bc) chunks, Rp = R rounded up to br;
// chunk s of row r at s * Rp + r); step 1 (rowsum_combine) adds the S partials of each row into
// y. A block of step 1 reads what every step-0 block of its rows wrote, so a runner that does
// not run step 0 whole, or binds the wrong buffer, gives wrong or NaN outputs.
// Public headers only, so that tests/plugin builds it into a plug-in as well.
#pragma once
#include <memory>
#include <string>

#include "tilepilot/operator.h"

namespace tp::test {

/// The operator, registered on first use as "test_two_pass_rowsum".
const ops::Operator& two_pass_rowsum();
/// A new instance, for a plug-in's registry.
std::shared_ptr<const ops::Operator> make_two_pass_rowsum();

/// An operator of that shape whose program is broken as `fault` says, for validation tests:
/// "bad_index" (a binding past the intermediates), "count" (one binding too few),
/// "dtype" (the intermediate declared bf16), "no_output" (the last step does not take y),
/// "empty" (no steps). Not registered.
std::unique_ptr<ops::Operator> broken_two_pass_rowsum(const std::string& fault);

} // namespace tp::test
