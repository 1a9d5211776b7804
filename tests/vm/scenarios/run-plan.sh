# numalens run --plan on record_probe: a first run is recorded (one thread per node
# first-touching its own blocks), an interleave plan is made from it in the guest, and a second
# run applies it. The placed run's profile comes back in $OUT/record.numalens, and the host
# checks that the arrays the threads first-touched block by block are interleaved page by page
# (numalens-vm-check run-plan).
R=$OUT/results.txt

timeout 60 numalens record -o /tmp/first.numalens record_probe first-touch \
    > $OUT/first-probe.txt 2> $OUT/first-stderr.txt ||
    echo "FAIL first-record: $(tail -3 $OUT/first-stderr.txt | tr '\n' ' ')" >> $R
if numalens plan /tmp/first.numalens --policy interleave -o $OUT/plan.json \
    > $OUT/plan-stdout.txt 2> $OUT/plan-stderr.txt; then
    echo "PASS plan-made" >> $R
else
    echo "FAIL plan-made: $(tail -3 $OUT/plan-stderr.txt | tr '\n' ' ')" >> $R
fi
timeout 60 numalens run --plan $OUT/plan.json -o $OUT/record.numalens record_probe first-touch \
    > $OUT/record-probe.txt 2> $OUT/record-stderr.txt
status=$?
if [ $status = 0 ]; then
    echo "PASS run-plan-exit-status" >> $R
else
    echo "FAIL run-plan-exit-status: numalens run exited with $status:" \
        "$(tail -3 $OUT/record-stderr.txt | tr '\n' ' ')" >> $R
fi
if grep -q "placed" $OUT/record-stderr.txt; then
    echo "PASS run-plan-reports-rules ($(grep -c placed $OUT/record-stderr.txt) rules placed)" >> $R
else
    echo "FAIL run-plan-reports-rules: $(tail -5 $OUT/record-stderr.txt | tr '\n' ' ')" >> $R
fi
cat $OUT/record-stderr.txt
cat $R
