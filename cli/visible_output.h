// What `pilot` writes passes through VisibleText (core/base/utf8.h) on its
// way out: whatever a program, a user or a file put into a verdict, a
// results.json or a message, no byte of it reaches the terminal as a control
// character. Line breaks stay line breaks; every other control, DEL, C1
// control, bidi control and byte that is not UTF-8 is written out visibly
// (\x1b, \r, \u009b, ...).
//
// The commands render such text themselves where it meets a layout (a
// padded column, the indented lines of a standard error tail); this is the
// net under everything else, messages included.
//
// Thread-safety: one stream, one thread.
#pragma once

#include <streambuf>
#include <string>

namespace pilot::cli {

// A stream buffer that writes to `target` what it is given, made visible.
// A character split across two writes is held back (at most three bytes)
// until the rest comes; a flush or the end writes what is held back as it
// is, made visible. A write `target` refuses makes sync() fail.
class VisibleStreamBuf : public std::streambuf {
 public:
  explicit VisibleStreamBuf(std::streambuf* target) : target_(target) {}
  ~VisibleStreamBuf() override;
  VisibleStreamBuf(const VisibleStreamBuf&) = delete;
  VisibleStreamBuf& operator=(const VisibleStreamBuf&) = delete;

 protected:
  int_type overflow(int_type ch) override;
  std::streamsize xsputn(const char* s, std::streamsize n) override;
  int sync() override;

 private:
  // Writes what is pending, all of it or up to a character still open.
  void Drain(bool all);

  std::streambuf* target_;
  std::string pending_;
  bool failed_ = false;
};

}  // namespace pilot::cli
