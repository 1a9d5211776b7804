# numalens record on record_probe: one thread per CPU node first-touches its own blocks of a
# malloc'd and a static array. The profile comes back in $OUT/record.numalens and the host
# checks it against the probe's own account of its layout (numalens-vm-check record).
R=$OUT/results.txt

if grep -q "\[$NLVM_THP\]" /sys/kernel/mm/transparent_hugepage/enabled; then
    echo "PASS thp-is-$NLVM_THP" >> $R
else
    echo "FAIL thp-is-$NLVM_THP: $(cat /sys/kernel/mm/transparent_hugepage/enabled)" >> $R
fi

# Bounded well below the guest's timeout, so that a hanging recorder still leaves a FAIL line
# and whatever it wrote.
timeout 90 numalens record -o $OUT/record.numalens record_probe first-touch \
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
