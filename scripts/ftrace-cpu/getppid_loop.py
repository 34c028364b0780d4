# getppid_loop.py DIR N: writes DIR/gen.pid, waits for DIR/go, calls getppid N times,
# writes DIR/gen.done, then stays alive until DIR/end exists (callgrind.sh).
import os, sys, time
d = sys.argv[1]; n = int(sys.argv[2])
open(d + "/gen.pid", "w").write(str(os.getpid()))
while not os.path.exists(d + "/go"): time.sleep(0.05)
g = os.getppid
for _ in range(n): g()
open(d + "/gen.done", "w").write("1")
while not os.path.exists(d + "/end"): time.sleep(0.05)
