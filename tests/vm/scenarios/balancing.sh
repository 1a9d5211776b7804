# NUMA balancing: a buffer first touched on the first node and read from the last one moves
# there, and perf's page-faults counter sees the hinting faults. Needs --fast-balancing.
R=$OUT/results.txt
nb=$(cat /proc/sys/kernel/numa_balancing)
if [ "$nb" = "$NLVM_NUMA_BALANCING" ] && [ "$nb" != 0 ]; then
    echo "PASS numa-balancing-is-$nb" >> $R
else
    echo "FAIL numa-balancing-is-$NLVM_NUMA_BALANCING: kernel.numa_balancing=$nb" >> $R
fi
for f in /sys/kernel/debug/sched/numa_balancing/*; do
    echo "${f##*/} $(cat $f)"
done > $OUT/balancing-tunables.txt
numa_probe balancing >> $R
cat $R
