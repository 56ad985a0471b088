with Ada.Streams; use Ada.Streams;
with Ada.Text_IO;
with Ada.Text_IO.Text_Streams;
procedure Main is
   In_S  : constant Ada.Text_IO.Text_Streams.Stream_Access :=
     Ada.Text_IO.Text_Streams.Stream (Ada.Text_IO.Standard_Input);
   Out_S : constant Ada.Text_IO.Text_Streams.Stream_Access :=
     Ada.Text_IO.Text_Streams.Stream (Ada.Text_IO.Standard_Output);
   Buf  : Stream_Element_Array (1 .. 4096);
   Last : Stream_Element_Offset;
begin
   loop
      Read (In_S.all, Buf, Last);
      exit when Last < Buf'First;
      Write (Out_S.all, Buf (Buf'First .. Last));
   end loop;
end Main;
