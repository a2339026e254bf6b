// The restricted pickle reader (runner/ckpt/pickle.h Unpickle) as program
// mode calls it: torch.save storages allowed, every class an opaque object.
#include "runner/ckpt/pickle.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  pilot::runner::UnpickleOptions opts;
  opts.torch_storages = true;
  (void)pilot::runner::Unpickle(pilot::fuzz::Text(data, size), "data.pkl", opts);
  return 0;
}
