"""An etcd cluster of a few members on loopback ports, for the fault-tolerance tests: each member
a child process (Debian's etcd-server), its data in a folder of the test's, removed on stop."""
import json
import os
import shutil
import socket
import subprocess
import time
import urllib.request

ETCD = "/usr/bin/etcd"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class EtcdCluster:
    def __init__(self, members, folder):
        shutil.rmtree(folder, ignore_errors=True)
        os.makedirs(folder)
        self.folder = folder
        self.endpoints = [f"http://127.0.0.1:{free_port()}" for _ in range(members)]
        peers = [f"http://127.0.0.1:{free_port()}" for _ in range(members)]
        initial = ",".join(f"member{m}={peers[m]}" for m in range(members))
        self.processes = []
        for m in range(members):
            # Generous Raft timings: the test machine's cores are shared.
            self.processes.append(subprocess.Popen(
                [ETCD, f"--name=member{m}", f"--data-dir={folder}/member{m}",
                 f"--listen-client-urls={self.endpoints[m]}",
                 f"--advertise-client-urls={self.endpoints[m]}",
                 f"--listen-peer-urls={peers[m]}", f"--initial-advertise-peer-urls={peers[m]}",
                 f"--initial-cluster={initial}", "--initial-cluster-state=new",
                 "--initial-cluster-token=titan-test", "--heartbeat-interval=200",
                 "--election-timeout=2000", "--logger=zap",
                 f"--log-outputs={folder}/member{m}.log"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        self.wait_for_leader()

    def wait_for_leader(self, timeout_s=60):
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                request = urllib.request.Request(self.endpoints[0] + "/v3/kv/range",
                                                 data=json.dumps({"key": "AA=="}).encode())
                with urllib.request.urlopen(request, timeout=2) as reply:
                    if "header" in json.load(reply):
                        return
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"etcd elected no leader within {timeout_s} s ({self.folder})")
            time.sleep(0.2)

    def kill(self, member):
        """SIGKILL, as a crashed member or a lost node."""
        self.processes[member].kill()
        self.processes[member].wait()

    def stop(self):
        for process in self.processes:
            process.kill()
            process.wait()
        shutil.rmtree(self.folder, ignore_errors=True)
