CREATE TEMP TABLE done AS SELECT writefile('output.txt', upper(CAST(readfile('input.txt') AS TEXT)));
