#include "cli/visible_output.h"

#include "core/base/utf8.h"

namespace pilot::cli {

VisibleStreamBuf::~VisibleStreamBuf() { Drain(/*all=*/true); }

VisibleStreamBuf::int_type VisibleStreamBuf::overflow(int_type ch) {
  if (traits_type::eq_int_type(ch, traits_type::eof())) return traits_type::not_eof(ch);
  pending_ += traits_type::to_char_type(ch);
  Drain(/*all=*/false);
  return failed_ ? traits_type::eof() : ch;
}

std::streamsize VisibleStreamBuf::xsputn(const char* s, std::streamsize n) {
  pending_.append(s, static_cast<size_t>(n));
  Drain(/*all=*/false);
  return failed_ ? 0 : n;
}

int VisibleStreamBuf::sync() {
  Drain(/*all=*/true);
  if (target_->pubsync() != 0) failed_ = true;
  return failed_ ? -1 : 0;
}

void VisibleStreamBuf::Drain(bool all) {
  const size_t keep = all ? 0 : Utf8IncompleteSuffix(pending_);
  if (pending_.size() == keep) return;
  const std::string shown =
      VisibleText(std::string_view(pending_).substr(0, pending_.size() - keep), Newlines::kKeep);
  pending_.erase(0, pending_.size() - keep);
  const auto n = static_cast<std::streamsize>(shown.size());
  if (target_->sputn(shown.data(), n) != n) failed_ = true;
}

}  // namespace pilot::cli
