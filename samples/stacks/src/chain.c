/* The call chain of stack_chain (samples/stacks): outer -> middle -> inner -> the
 * writev system call, each function kept out of line and built with frame pointers
 * (build.rs). inner goes through glibc's syscall(), which keeps no frame pointer, so a
 * frame-pointer walk skips inner and a DWARF unwind finds it (docs/stacks.md). The
 * CALL comments mark the lines tests/vm/stacks.rs expects on each frame. */
#define _GNU_SOURCE
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

__attribute__((noinline)) long inner(int fd, const struct iovec *iov, int count) {
    return syscall(SYS_writev, fd, iov, count); /* CALL inner */
}

__attribute__((noinline)) long middle(int fd, const struct iovec *iov, int count) {
    long r = inner(fd, iov, count); /* CALL middle */
    __asm__ volatile("" ::: "memory");
    return r;
}

__attribute__((noinline)) long outer(int fd, const struct iovec *iov, int count) {
    long r = middle(fd, iov, count); /* CALL outer */
    __asm__ volatile("" ::: "memory");
    return r;
}
