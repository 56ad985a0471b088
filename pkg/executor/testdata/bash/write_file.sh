mkdir -p out
printf 'result: ok' > out/result.txt
echo "written"
