// cudaperf CPU emulation: assert(). Inside a kernel a failed assertion fails the launch like CUDA's
// device-side assert (cudaErrorAssert, with the condition, file and line in the launch's error message);
// in host code it prints and aborts as usual. Honours NDEBUG and may be included repeatedly.
#undef assert
#ifdef NDEBUG
#define assert(e) (static_cast<void>(0))
#else
#ifdef __cplusplus
namespace cudaperf_emu {
void assert_fail(const char* expr, const char* file, int line);
}
#define assert(e) (static_cast<bool>(e) ? static_cast<void>(0) : ::cudaperf_emu::assert_fail(#e, __FILE__, __LINE__))
#else
#include_next <assert.h>
#endif
#endif
