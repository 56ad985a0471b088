program u;
begin
  writeln('héllo wörld ✓ 日本');
end.
