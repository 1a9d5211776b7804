# Placement checks: the guest's NUMA layout (sysfs and numalens' view of it), first-touch
# placement from every node, move_pages between every pair of nodes.
R=$OUT/results.txt

check_thp() {
    if grep -q "\[$NLVM_THP\]" /sys/kernel/mm/transparent_hugepage/enabled; then
        echo "PASS thp-is-$NLVM_THP" >> $R
    else
        echo "FAIL thp-is-$NLVM_THP: $(cat /sys/kernel/mm/transparent_hugepage/enabled)" >> $R
    fi
}

check_sysfs() {
    for n in /sys/devices/system/node/node[0-9]*; do
        echo "node ${n##*node} cpus $(cat $n/cpulist) distance $(cat $n/distance)"
    done | sort -n -k2 > $OUT/sysfs.txt
    if cmp -s $OUT/sysfs.txt /etc/numalens-vm/expected-sysfs.txt; then
        echo "PASS sysfs-topology" >> $R
    else
        echo "FAIL sysfs-topology: got [$(tr '\n' ';' < $OUT/sysfs.txt)]" \
            "expected [$(tr '\n' ';' < /etc/numalens-vm/expected-sysfs.txt)]" >> $R
    fi
}

# The host compares topology.json with the spec (numalens-vm --check-topology).
run_numalens_topology() {
    if ! numalens topology --json > $OUT/topology.json 2> /tmp/topology.err; then
        echo "numalens topology --json failed: $(head -c 300 /tmp/topology.err)"
        rm -f $OUT/topology.json
    fi
}

check_thp
check_sysfs
command -v numalens > /dev/null && run_numalens_topology
numa_probe first-touch >> $R
numa_probe move-pages >> $R
cat $R
