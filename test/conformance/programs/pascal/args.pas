program args;
var i: integer;
begin
  for i := 1 to ParamCount do
    writeln(ParamStr(i));
end.
