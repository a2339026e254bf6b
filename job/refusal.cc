#include "job/refusal.h"

#include <limits>

#include "core/base/json_util.h"
#include "core/records/record.h"

namespace pilot::job {

template <class V, class S>
void Fields(V& v, S& s, std::type_identity<ChangeRefusal>) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  v("schema", s.schema);
  v("job_id", s.job_id, IntRange{1, kMax});
  v("pilot_job", s.pilot_job);
  v("user", s.user);
  v("uid", s.uid, IntRange{0, kMax});
  v("refused_at", s.refused_at);
  v("change", s.change);
  v("reason", s.reason);
}

Result<ChangeRefusal> ParseChangeRefusal(std::string_view text, const std::string& label) {
  PILOT_ASSIGN_OR_RETURN(Json j, ParseJsonText(text, label, 1 << 16));
  PILOT_RETURN_IF_ERROR(CheckJsonSchema(j, label, kRefusalSchema));
  ChangeRefusal r;
  PILOT_RETURN_IF_ERROR(RecordFromJson(j, &r).Context(label));
  return r;
}

}  // namespace pilot::job
