program rt;
{$mode objfpc}
uses SysUtils;
begin
  raise Exception.Create('boom');
end.
