"""A rank that uses a known share of the hardware, for the system-metrics tests: it holds HW_STUB_MB
(default 40) MB plus 10 MB per rank of touched memory and burns CPU a HW_STUB_DUTY (default 0.3) share
of the time, for HW_STUB_S (default 4) seconds. No torch, no GPU."""
import os
import time

rank = int(os.environ.get("RANK", "0"))
held = bytearray((int(os.environ.get("HW_STUB_MB", "40")) + 10 * rank) * 1024 * 1024)
for i in range(0, len(held), 4096):
    held[i] = 1                       # touched: resident
duty = float(os.environ.get("HW_STUB_DUTY", "0.3"))
end = time.monotonic() + float(os.environ.get("HW_STUB_S", "4"))
while time.monotonic() < end:
    t = time.process_time()
    while time.process_time() - t < 0.02 * duty:     # CPU time, not wall time: the same share under load
        pass
    time.sleep(0.02 * (1 - duty))
print("rank", rank, "held", len(held) // (1024 * 1024), "MB", flush=True)
