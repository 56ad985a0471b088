program e;
begin
  Halt(3);
end.
