program files;
{$mode objfpc}{$H+}
uses SysUtils, Classes;
var
  s: TStringStream;
  o: TFileStream;
  t: string;
begin
  s := TStringStream.Create('');
  s.LoadFromFile('input.txt');
  t := UpperCase(s.DataString);
  o := TFileStream.Create('output.txt', fmCreate);
  if Length(t) > 0 then o.WriteBuffer(t[1], Length(t));
  o.Free;
  s.Free;
end.
