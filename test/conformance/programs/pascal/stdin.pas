program copy;
uses SysUtils;
var
  buf: array[0..65535] of byte;

  n: longint;
begin
  n := 0;
  repeat
    n := FileRead(0, buf, SizeOf(buf));
    if n > 0 then FileWrite(1, buf, n);
  until n <= 0;
end.
