program ce;
var x: integer;
begin
  x := 'text';
end.
