package containerd

// The sandbox's privilege boundary. Code inside a sandbox is hostile by
// assumption (an Agent runs whatever a model or a repository says), and the
// Workspace is bind-mounted read-write, so anything root inside may do to a
// file lands on the host. Three layers keep that from handing out host
// privileges; docs/design/sandbox.md gives the threat each one stops.
//
//   - A user namespace maps container root to the owner of the Workspace
//     directory and every other container ID to an unprivileged range: files
//     written through the mount belong to that owner, and root inside has no
//     capability over anything the host did not map to it.
//   - The capability set keeps what package managers and build tools need as
//     root inside and drops the rest.
//   - A seccomp profile refuses set-id mode bits and device nodes whatever the
//     owner (a root-owned Workspace maps container root to host root), and
//     every system call it does not list.

import (
	"context"
	"fmt"
	"os"
	"strings"
	"syscall"

	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/pkg/oci"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// securityGeneration names the privilege boundary above and the mounts the
// driver adds. Containers carry it as labelSecurity; one built under
// another generation (or before there was one) is never reused: Attach
// reports it exited and Prepare replaces it. Bump it whenever the mapping,
// the capabilities, the profile or the driver's own mounts change (2: the
// sandbox helper at helper.Dir).
const securityGeneration = "2"

// labelSecurity is the container label that holds securityGeneration.
const labelSecurity = "lathe.security"

// Container IDs 1..subIDSize-1 map to host IDs subIDBase+1.., a range no
// login account uses, so that the image's service users (apt's _apt, nobody)
// exist inside without being anyone on the host. Every sandbox shares it:
// sandboxes are kept apart by their namespaces, not by their IDs.
const (
	subIDBase = 1 << 30
	subIDSize = 65536
)

// idMappings maps container root to the owner (uid, or gid) of the
// Workspace, like Podman's --userns=keep-id, and the rest of the container's
// IDs to the subordinate range.
func idMappings(owner uint32) ([]specs.LinuxIDMapping, error) {
	if owner > subIDBase && owner < subIDBase+subIDSize {
		return nil, fmt.Errorf("workspace owner %d lies in the sandboxes' subordinate ID range %d-%d", owner, subIDBase+1, subIDBase+subIDSize-1)
	}
	return []specs.LinuxIDMapping{
		{ContainerID: 0, HostID: owner, Size: 1},
		{ContainerID: 1, HostID: subIDBase + 1, Size: subIDSize - 1},
	}, nil
}

// workspaceOwner is the owner and group of dir.
func workspaceOwner(dir string) (uid, gid uint32, err error) {
	fi, err := os.Stat(dir)
	if err != nil {
		return 0, 0, fmt.Errorf("sandbox working dir: %w", err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, fmt.Errorf("sandbox working dir %q: no owner", dir)
	}
	return st.Uid, st.Gid, nil
}

// capabilities is the whole capability set of every sandbox process (bounding,
// permitted, effective), each for a need of root inside the sandbox. Compared
// with containerd's default it drops CAP_MKNOD (device nodes), CAP_FSETID
// (keeping set-id bits on files root changes), CAP_SETFCAP (file
// capabilities, which a root-owned Workspace would honour on the host),
// CAP_SETPCAP, CAP_NET_RAW (raw packets onto the host bridge), CAP_SYS_CHROOT
// and CAP_AUDIT_WRITE. CAP_SYS_ADMIN, CAP_NET_ADMIN, CAP_SYS_PTRACE,
// CAP_SYS_MODULE, CAP_DAC_READ_SEARCH, CAP_LINUX_IMMUTABLE and the rest of
// that kind were never in it.
var capabilities = []string{
	"CAP_CHOWN",            // dpkg and tar give files their owners
	"CAP_DAC_OVERRIDE",     // root reads and writes what the image's users own
	"CAP_FOWNER",           // chmod and utime on files of the image's users
	"CAP_SETUID",           // apt drops to _apt; servers drop to their users
	"CAP_SETGID",           // the same, for groups
	"CAP_KILL",             // signals to processes of the image's users
	"CAP_NET_BIND_SERVICE", // servers on ports below 1024 for the Preview
}

// withSecurity puts the sandbox in a user namespace with the given mappings
// and applies the capability set, no_new_privs and the seccomp profile.
func withSecurity(uidMap, gidMap []specs.LinuxIDMapping) oci.SpecOpts {
	return oci.Compose(
		oci.WithUserNamespace(uidMap, gidMap),
		oci.WithCapabilities(capabilities),
		oci.WithNoNewPrivileges,
		func(_ context.Context, _ oci.Client, _ *containers.Container, s *oci.Spec) error {
			s.Linux.Seccomp = seccompProfile()
			return nil
		},
	)
}

// Mode and flag bits the profile compares.
const (
	setIDBits = unix.S_ISUID | unix.S_ISGID
	// createFlags are the open flags under which the mode argument counts.
	createFlags = unix.O_CREAT | unix.O_TMPFILE&^unix.O_DIRECTORY
)

// seccompProfile allows the system calls a sandbox needs and refuses the
// rest: the dangerous argument combinations below with EPERM, and every call
// it does not allow (including every call newer than the runtime's seccomp
// library knows, such as fchmodat2 to libseccomp 2.5) with ENOSYS, which
// callers treat as "not implemented here" and fall back from (clone3,
// openat2).
func seccompProfile() *specs.LinuxSeccomp {
	enosys := uint(unix.ENOSYS)
	eperm := uint(unix.EPERM)
	p := &specs.LinuxSeccomp{DefaultAction: specs.ActErrno, DefaultErrnoRet: &enosys}
	p.Syscalls = append(p.Syscalls, specs.LinuxSyscall{Names: strings.Fields(allowedSyscalls), Action: specs.ActAllow})
	allow := func(name string, args ...specs.LinuxSeccompArg) {
		p.Syscalls = append(p.Syscalls, specs.LinuxSyscall{Names: []string{name}, Action: specs.ActAllow, Args: args})
	}
	refuse := func(name string, args ...specs.LinuxSeccompArg) {
		p.Syscalls = append(p.Syscalls, specs.LinuxSyscall{Names: []string{name}, Action: specs.ActErrno, ErrnoRet: &eperm, Args: args})
	}
	// masked is the condition (arg & mask) == value. Conditions of one rule
	// must name distinct arguments (they are and-ed); separate rules are
	// or-ed.
	masked := func(arg uint, mask, value uint64) specs.LinuxSeccompArg {
		return specs.LinuxSeccompArg{Index: arg, Value: mask, ValueTwo: value, Op: specs.OpMaskedEqual}
	}
	// Set-id bits on a chmod: a set-user-ID file in the Workspace runs as its
	// owner for whoever on the host executes it.
	for name, mode := range map[string]uint{"chmod": 1, "fchmod": 1, "fchmodat": 2, "fchmodat2": 2} {
		allow(name, masked(mode, setIDBits, 0))
		refuse(name, masked(mode, unix.S_ISUID, unix.S_ISUID))
		refuse(name, masked(mode, unix.S_ISGID, unix.S_ISGID))
	}
	// Set-id bits on a file created by open: the mode counts only with
	// O_CREAT or O_TMPFILE.
	for name, at := range map[string]uint{"open": 1, "openat": 2} {
		allow(name, masked(at+1, setIDBits, 0))
		allow(name, masked(at, createFlags, 0))
		for _, flag := range []uint64{unix.O_CREAT, unix.O_TMPFILE &^ unix.O_DIRECTORY} {
			for _, bit := range []uint64{unix.S_ISUID, unix.S_ISGID} {
				refuse(name, masked(at, flag, flag), masked(at+1, bit, bit))
			}
		}
	}
	allow("creat", masked(1, setIDBits, 0))
	refuse("creat", masked(1, unix.S_ISUID, unix.S_ISUID))
	refuse("creat", masked(1, unix.S_ISGID, unix.S_ISGID))
	// mknod makes FIFOs, sockets and plain files (without set-id bits);
	// never device nodes, which would open the host's disks to whoever can
	// reach the Workspace.
	for name, mode := range map[string]uint{"mknod": 1, "mknodat": 2} {
		for _, kind := range []uint64{0, unix.S_IFREG, unix.S_IFIFO, unix.S_IFSOCK} {
			allow(name, masked(mode, unix.S_IFMT|setIDBits, kind))
		}
		refuse(name, masked(mode, unix.S_IFMT, unix.S_IFCHR))
		refuse(name, masked(mode, unix.S_IFMT, unix.S_IFBLK))
		refuse(name, masked(mode, unix.S_ISUID, unix.S_ISUID))
		refuse(name, masked(mode, unix.S_ISGID, unix.S_ISGID))
	}
	// New user namespaces would hand back, inside them, every capability
	// dropped above, and widen what the kernel exposes. clone3 passes its
	// flags in memory the filter cannot read: it is refused with ENOSYS
	// (unlisted), and the C library falls back to clone.
	allow("clone", masked(0, unix.CLONE_NEWUSER, 0))
	refuse("clone", masked(0, unix.CLONE_NEWUSER, unix.CLONE_NEWUSER))
	allow("unshare", masked(0, unix.CLONE_NEWUSER, 0))
	refuse("unshare", masked(0, unix.CLONE_NEWUSER, unix.CLONE_NEWUSER))
	return p
}

// allowedSyscalls are allowed whatever their arguments. Not listed, so
// refused with ENOSYS: the calls handled with conditions above; openat2 (its
// mode is out of the filter's reach); io_uring_* (its operations bypass
// seccomp); mount and the new mount API, pivot_root, swapon/off, reboot,
// kexec, kernel modules, acct, quotactl, iopl/ioperm, setting the clock
// (privileged, and not namespaced); bpf, perf_event_open, userfaultfd (kernel
// attack surface); keyctl and add_key/request_key (the keyring is not
// namespaced); open_by_handle_at (opens host files by handle);
// lsm_set_self_attr; and obsolete calls.
const allowedSyscalls = `
	read write close stat fstat lstat newfstatat statx poll ppoll select pselect6 lseek
	mmap mprotect munmap mremap msync mincore madvise brk mlock mlock2 munlock mlockall munlockall
	remap_file_pages process_madvise process_mrelease memfd_create memfd_secret membarrier mseal
	pkey_mprotect pkey_alloc pkey_free map_shadow_stack cachestat
	mbind set_mempolicy get_mempolicy migrate_pages move_pages set_mempolicy_home_node
	rt_sigaction rt_sigprocmask rt_sigreturn rt_sigpending rt_sigtimedwait rt_sigqueueinfo
	rt_tgsigqueueinfo rt_sigsuspend sigaltstack signalfd signalfd4 pause alarm kill tkill tgkill
	pidfd_open pidfd_send_signal pidfd_getfd
	ioctl fcntl flock pread64 pwrite64 readv writev preadv pwritev preadv2 pwritev2
	sendfile splice tee vmsplice copy_file_range fsync fdatasync sync syncfs sync_file_range
	readahead fadvise64 fallocate truncate ftruncate
	access faccessat faccessat2 getdents getdents64 getcwd chdir fchdir
	rename renameat renameat2 mkdir mkdirat rmdir link linkat unlink unlinkat symlink symlinkat
	readlink readlinkat chown fchown lchown fchownat umask utime utimes utimensat futimesat
	statfs fstatfs name_to_handle_at file_getattr file_setattr
	setxattr lsetxattr fsetxattr getxattr lgetxattr fgetxattr listxattr llistxattr flistxattr
	removexattr lremovexattr fremovexattr setxattrat getxattrat listxattrat removexattrat
	inotify_init inotify_init1 inotify_add_watch inotify_rm_watch fanotify_init fanotify_mark
	dup dup2 dup3 pipe pipe2 close_range eventfd eventfd2
	epoll_create epoll_create1 epoll_ctl epoll_wait epoll_pwait epoll_pwait2
	timerfd_create timerfd_settime timerfd_gettime
	socket socketpair connect accept accept4 bind listen shutdown getsockname getpeername
	setsockopt getsockopt sendto recvfrom sendmsg recvmsg sendmmsg recvmmsg
	fork vfork execve execveat exit exit_group wait4 waitid set_tid_address
	uname sethostname setdomainname sysinfo times getrusage getrlimit setrlimit prlimit64
	getpriority setpriority ioprio_set ioprio_get personality prctl arch_prctl seccomp
	set_thread_area get_thread_area modify_ldt getcpu kcmp capget capset chroot setns
	getpid getppid gettid getuid geteuid getgid getegid getresuid getresgid getgroups
	setuid setgid setreuid setregid setresuid setresgid setfsuid setfsgid setgroups
	setpgid getpgid getpgrp setsid getsid
	ptrace process_vm_readv process_vm_writev
	sched_yield sched_setparam sched_getparam sched_setscheduler sched_getscheduler
	sched_get_priority_max sched_get_priority_min sched_rr_get_interval
	sched_setaffinity sched_getaffinity sched_setattr sched_getattr
	futex futex_waitv futex_wake futex_wait futex_requeue set_robust_list get_robust_list
	rseq rseq_slice_yield restart_syscall
	nanosleep clock_nanosleep clock_gettime clock_getres gettimeofday time adjtimex
	getitimer setitimer timer_create timer_settime timer_gettime timer_getoverrun timer_delete
	shmget shmat shmctl shmdt semget semop semctl semtimedop msgget msgsnd msgrcv msgctl
	mq_open mq_unlink mq_timedsend mq_timedreceive mq_notify mq_getsetattr
	io_setup io_destroy io_getevents io_pgetevents io_submit io_cancel
	getrandom landlock_create_ruleset landlock_add_rule landlock_restrict_self
	lsm_get_self_attr lsm_list_modules statmount listmount listns
`
