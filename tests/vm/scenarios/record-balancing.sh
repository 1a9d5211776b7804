# numalens record with NUMA balancing on (--fast-balancing): a thread on the first CPU node
# first-touches 64 MiB, a thread on the last one reads it until the kernel has moved it. The
# profile comes back in $OUT/record.numalens; the host checks the hinting-fault samples and the
# final page nodes (numalens-vm-check record-balancing).
R=$OUT/results.txt

nb=$(cat /proc/sys/kernel/numa_balancing)
if [ "$nb" = 1 ]; then
    echo "PASS numa-balancing-is-1" >> $R
else
    echo "FAIL numa-balancing-is-1: kernel.numa_balancing=$nb" >> $R
fi

timeout 100 numalens record -o $OUT/record.numalens record_probe balancing \
    > $OUT/record-probe.txt 2> $OUT/record-stderr.txt
status=$?
if [ $status = 0 ]; then
    echo "PASS record-exit-status" >> $R
else
    echo "FAIL record-exit-status: numalens record exited with $status:" \
        "$(tail -3 $OUT/record-stderr.txt | tr '\n' ' ')" >> $R
fi
cat $OUT/record-stderr.txt
cat $R
