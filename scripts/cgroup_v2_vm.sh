#!/usr/bin/env bash
# Run the local backend's cgroup tests on a pure cgroup v2 kernel, in a throwaway VM, from a
# host that has cgroup v1 (where v2 controllers cannot be had). Manual, not part of CI.
# The VM boots Debian's kernel with a busybox initramfs, mounts this host's / read-only over 9p,
# mounts only cgroup2 (every controller on v2), puts harness alone in a group of its own (as
# `systemd-run --scope -p Delegate=yes` would) and runs the tests. Needs root, apt and qemu
# (installed here); runs under TCG (nested KVM hung on the machine this was written on).
# Usage: scripts/cgroup_v2_vm.sh [pytest -k expression]
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
work=${WORK:-/tmp/harness-cgroup-v2-vm}
select=${1:-"not fork_bomb"}  # a fork bomb under emulation does not reach pids.max
mkdir -p "$work/out" "$work/initrd"/{bin,mods,proc,sys,dev,newroot}
cd "$work"
command -v qemu-system-x86_64 >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends qemu-system-x86
kernel_pkg=$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-/ {print $2; exit}')
[ -d kernel ] || { apt-get download "$kernel_pkg" busybox-static; dpkg-deb -x linux-image-*.deb kernel; dpkg-deb -x busybox-static*.deb busybox; }
cp busybox/bin/busybox initrd/bin/
for m in drivers/virtio/{virtio,virtio_ring,virtio_pci_legacy_dev,virtio_pci_modern_dev,virtio_pci} fs/netfs/netfs fs/fscache/fscache net/9p/{9pnet,9pnet_virtio} fs/9p/9p; do
  cp kernel/lib/modules/*/kernel/$m.ko initrd/mods/
done
cat > initrd/init <<'INIT'
#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc; mount -t sysfs sys /sys; mount -t devtmpfs dev /dev
for pass in 1 2; do for m in virtio virtio_ring virtio_pci_legacy_dev virtio_pci_modern_dev virtio_pci netfs fscache 9pnet 9pnet_virtio 9p; do insmod /mods/$m.ko 2>/dev/null; done; done
R=/newroot
mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000,ro hostroot $R || poweroff -f
mount -t proc proc $R/proc; mount -t sysfs sys $R/sys; mount -t devtmpfs dev $R/dev
mkdir -p $R/dev/pts; mount -t devpts -o ptmxmode=666 devpts $R/dev/pts
for d in tmp var/tmp run root/.cache/harness/local root/.cache/harness/local-snapshots; do mount -t tmpfs tmpfs $R/$d 2>/dev/null; done
mkdir -p $R/tmp/out; mount -t 9p -o trans=virtio,version=9p2000.L out $R/tmp/out
mount -t cgroup2 none $R/sys/fs/cgroup
echo "+memory +pids +cpu" > $R/sys/fs/cgroup/cgroup.subtree_control
mkdir $R/sys/fs/cgroup/init.scope $R/sys/fs/cgroup/harness.scope
echo $$ > $R/sys/fs/cgroup/init.scope/cgroup.procs
# switch_root, not chroot: a chrooted process may not create user namespaces (spec.user needs one).
# When the script ends, pid 1 exits and the VM stops (panic=-1 with -no-reboot).
exec switch_root $R /bin/bash -c "/bin/bash /tmp/out/run.sh > /tmp/out/log.txt 2>&1; sync"
INIT
chmod +x initrd/init
py=$(python3 -c 'import sys; print(sys.executable)')  # the interpreter itself, not a pyenv shim
cat > out/run.sh <<RUN
cd "$repo"; export HOME=$HOME PATH="$(dirname "$py"):/usr/sbin:/usr/bin:/sbin:/bin" PYTHONDONTWRITEBYTECODE=1
"$py" -c "
import os, sys
open('/sys/fs/cgroup/harness.scope/cgroup.procs', 'w').write(str(os.getpid()))  # alone in its group
import pytest
sys.exit(pytest.main(['-p', 'no:cacheprovider', '-q', '-rs', 'tests/sandboxes/test_cgroups.py',
                      'tests/sandboxes/test_local_backend.py', '-k', '''$select''']))
"
RUN
python3 - <<'CPIO'
import gzip, os, stat
out, ino = gzip.open("initrd.gz", "wb"), 1
def entry(name, mode, data=b""):
    global ino
    fields = [ino, mode, 0, 0, 1, 0, len(data), 0, 0, 0, 0, len(name) + 1, 0]
    head = ("070701" + "".join(f"{v:08x}" for v in fields)).encode() + name.encode() + b"\0"
    out.write(head + b"\0" * (-len(head) % 4) + data + b"\0" * (-len(data) % 4))
    ino += 1
for folder, dirs, files in os.walk("initrd"):
    for name in sorted(dirs) + sorted(files):
        path = os.path.join(folder, name)
        mode = os.lstat(path).st_mode
        entry(os.path.relpath(path, "initrd"), mode, open(path, "rb").read() if stat.S_ISREG(mode) else b"")
entry("TRAILER!!!", 0)
out.close()
CPIO
rm -f out/log.txt
timeout 2400 qemu-system-x86_64 -accel tcg -cpu max -m 3G -smp 1 -nographic -no-reboot \
  -kernel kernel/boot/vmlinuz-* -initrd initrd.gz -append "console=ttyS0 panic=-1 quiet" \
  -virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap \
  -virtfs local,path="$work/out",mount_tag=out,security_model=none,multidevs=remap > qemu.log 2>&1 || true
cat out/log.txt
