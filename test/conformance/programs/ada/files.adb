with Ada.Streams; use Ada.Streams;
with Ada.Streams.Stream_IO; use Ada.Streams.Stream_IO;
with Ada.Characters.Handling;
procedure Main is
   F_In, F_Out : File_Type;
   Buf  : Stream_Element_Array (1 .. 4096);
   Last : Stream_Element_Offset;
begin
   Open (F_In, In_File, "input.txt");
   Create (F_Out, Out_File, "output.txt");
   loop
      Read (F_In, Buf, Last);
      exit when Last < Buf'First;
      for I in Buf'First .. Last loop
         --  ASCII letters only; bytes of UTF-8 sequences pass through,
         --  so multi-byte letters are fixed below for the 2-byte Latin-1 range
         if Buf (I) in 97 .. 122 then
            Buf (I) := Buf (I) - 32;
         elsif I > Buf'First and then Buf (I - 1) = 16#C3# and then Buf (I) in 16#A0# .. 16#BE# and then Buf (I) /= 16#B7# then
            Buf (I) := Buf (I) - 32;
         end if;
      end loop;
      Write (F_Out, Buf (Buf'First .. Last));
   end loop;
   Close (F_In);
   Close (F_Out);
end Main;
