<?xml version="1.0" encoding="utf-8"?>
<!DOCTYPE TS>
<TS version="2.1" language="de">
<context>
    <name>ComposePage</name>
    <message>
        <source>Queue</source>
        <translation>Warteschlange</translation>
    </message>
    <message>
        <source>&amp;Caption</source>
        <translation>&amp;Beschreibung</translation>
    </message>
    <message>
        <source>&amp;Lyrics</source>
        <translation>&amp;Songtext</translation>
    </message>
    <message>
        <source>Instrumental</source>
        <translation>Instrumental</translation>
    </message>
    <message>
        <source>Inspire me</source>
        <translation>Inspiriere mich</translation>
    </message>
    <message>
        <source>Tidy my lyrics</source>
        <translation>Songtext ordnen</translation>
    </message>
    <message>
        <source>Song</source>
        <translation>Song</translation>
    </message>
    <message>
        <source>auto (10–600 s)</source>
        <translation>auto (10–600 s)</translation>
    </message>
    <message>
        <source>auto (30–300)</source>
        <translation>auto (30–300)</translation>
    </message>
    <message>
        <source>Key</source>
        <translation>Tonart</translation>
    </message>
    <message>
        <source>random</source>
        <translation>zufällig</translation>
    </message>
    <message>
        <source>Seed</source>
        <translation>Seed</translation>
    </message>
    <message>
        <source>Lock</source>
        <translation>Festhalten</translation>
    </message>
    <message>
        <source>Style</source>
        <translation>Stil</translation>
    </message>
    <message>
        <source>Duration (s)</source>
        <translation>Dauer (s)</translation>
    </message>
    <message>
        <source>BPM</source>
        <translation>BPM</translation>
    </message>
    <message>
        <source>Time signature</source>
        <translation>Taktart</translation>
    </message>
    <message>
        <source>Language</source>
        <translation>Sprache</translation>
    </message>
    <message>
        <source>Model</source>
        <translation>Modell</translation>
    </message>
    <message>
        <source>Node</source>
        <translation>Knoten</translation>
    </message>
    <message>
        <source>Format</source>
        <translation>Format</translation>
    </message>
    <message>
        <source>Takes</source>
        <translation>Takes</translation>
    </message>
    <message>
        <source>Starting from</source>
        <translation>Ausgangsmaterial</translation>
    </message>
    <message>
        <source>Faithful</source>
        <translation>Originalgetreu</translation>
    </message>
    <message>
        <source>Generate</source>
        <translation>Erzeugen</translation>
    </message>
    <message>
        <source>Cover this file</source>
        <translation>Diese Datei covern</translation>
    </message>
</context>
<context>
    <name>ExportDialog</name>
    <message>
        <source>Folder</source>
        <translation>Ordner</translation>
    </message>
</context>
<context>
    <name>ExtendDialog</name>
    <message>
        <source>Extend</source>
        <translation>Verlängern</translation>
    </message>
    <message>
        <source>Leave empty to continue the music without new words</source>
        <translation>Leer lassen, um die Musik ohne neuen Text fortzusetzen</translation>
    </message>
    <message>
        <source>Lyrics for the new part</source>
        <translation>Songtext für den neuen Teil</translation>
    </message>
    <message>
        <source>&amp;Lyrics for the new part</source>
        <translation>&amp;Songtext für den neuen Teil</translation>
    </message>
    <message>
        <source> s</source>
        <translation> s</translation>
    </message>
    <message>
        <source>Seconds of the song the new part hears</source>
        <translation>Sekunden des Songs, die der neue Teil hört</translation>
    </message>
    <message>
        <source>The new part takes its voice and sound from this much of the song&apos;s end</source>
        <translation>Der neue Teil übernimmt Stimme und Klang aus so viel vom Ende des Songs</translation>
    </message>
    <message>
        <source>&amp;Hear the song&apos;s last</source>
        <translation>&amp;Vom Songende hören</translation>
    </message>
</context>
<context>
    <name>FoundModelsDialog</name>
    <message>
        <source>Models on this machine</source>
        <translation>Modelle auf diesem Rechner</translation>
    </message>
    <message>
        <source>ACE-Step model files other tools already downloaded: the Hugging Face cache (Lemonade, ComfyUI), acestep.cpp&apos;s models folder, and folders you add. Adopted files are checked and linked, never moved or changed.</source>
        <translation>ACE-Step-Modelldateien, die andere Programme schon heruntergeladen haben: der Hugging-Face-Cache (Lemonade, ComfyUI), der Modellordner von acestep.cpp und Ordner, die Sie hinzufügen. Übernommene Dateien werden geprüft und verknüpft, nie verschoben oder verändert.</translation>
    </message>
    <message>
        <source>Model files found</source>
        <translation>Gefundene Modelldateien</translation>
    </message>
    <message>
        <source>Copy files that cannot be linked (on another drive)</source>
        <translation>Dateien kopieren, die nicht verknüpft werden können (auf einem anderen Laufwerk)</translation>
    </message>
    <message>
        <source>A copy uses the file&apos;s size again on Cantor&apos;s drive</source>
        <translation>Eine Kopie belegt die Größe der Datei noch einmal auf Cantors Laufwerk</translation>
    </message>
    <message>
        <source>Add a folder…</source>
        <translation>Ordner hinzufügen…</translation>
    </message>
    <message>
        <source>Look in another folder for .gguf model files</source>
        <translation>In einem weiteren Ordner nach .gguf-Modelldateien suchen</translation>
    </message>
    <message>
        <source>Adopt</source>
        <translation>Übernehmen</translation>
    </message>
    <message>
        <source>Check the picked files and add them to the library</source>
        <translation>Die gewählten Dateien prüfen und in die Bibliothek aufnehmen</translation>
    </message>
    <message>
        <source>Looking…</source>
        <translation>Suche…</translation>
    </message>
    <message>
        <source>look for models</source>
        <translation>nach Modellen suchen</translation>
    </message>
    <message>
        <source>A folder with .gguf files</source>
        <translation>Ein Ordner mit .gguf-Dateien</translation>
    </message>
    <message numerus="yes">
        <source>Checking %n file(s)…</source>
        <translation>
            <numerusform>Prüfe %n Datei…</numerusform>
            <numerusform>Prüfe %n Dateien…</numerusform>
        </translation>
    </message>
    <message>
        <source>adopt the files</source>
        <translation>die Dateien übernehmen</translation>
    </message>
</context>
<context>
    <name>HardwarePage</name>
    <message>
        <source>Backends</source>
        <translation>Backends</translation>
    </message>
    <message>
        <source>What the backend search did</source>
        <translation>Was die Backend-Suche getan hat</translation>
    </message>
</context>
<context>
    <name>LibraryPage</name>
    <message>
        <source>Models</source>
        <translation>Modelle</translation>
    </message>
    <message>
        <source>Hugging Face &amp;token</source>
        <translation>Hugging-Face-&amp;Token</translation>
    </message>
    <message>
        <source>Adapters</source>
        <translation>Adapter</translation>
    </message>
</context>
<context>
    <name>MainWindow</name>
    <message>
        <source>Compose</source>
        <translation>Komponieren</translation>
    </message>
    <message>
        <source>Songs</source>
        <translation>Songs</translation>
    </message>
    <message>
        <source>Library</source>
        <translation>Bibliothek</translation>
    </message>
    <message>
        <source>Hardware &amp; Backends</source>
        <translation>Hardware &amp; Backends</translation>
    </message>
    <message>
        <source>Settings</source>
        <translation>Einstellungen</translation>
    </message>
    <message>
        <source>Pages</source>
        <translation>Seiten</translation>
    </message>
    <message>
        <source>Starting…</source>
        <translation>Startet…</translation>
    </message>
    <message>
        <source>Start node</source>
        <translation>Knoten starten</translation>
    </message>
    <message>
        <source>Node log</source>
        <translation>Knoten-Protokoll</translation>
    </message>
    <message>
        <source>Song ready: %1</source>
        <translation>Song fertig: %1</translation>
    </message>
    <message>
        <source>Song failed: %1</source>
        <translation>Song fehlgeschlagen: %1</translation>
    </message>
    <message>
        <source>Stop node</source>
        <translation>Knoten anhalten</translation>
    </message>
</context>
<context>
    <name>MenuBar</name>
    <message>
        <source>&amp;File</source>
        <translation>&amp;Datei</translation>
    </message>
    <message>
        <source>&amp;Edit</source>
        <translation>&amp;Bearbeiten</translation>
    </message>
    <message>
        <source>&amp;Song</source>
        <translation>&amp;Song</translation>
    </message>
    <message>
        <source>&amp;Window</source>
        <translation>&amp;Fenster</translation>
    </message>
    <message>
        <source>&amp;Help</source>
        <translation>&amp;Hilfe</translation>
    </message>
    <message>
        <source>C&amp;ompose</source>
        <translation>&amp;Komponieren</translation>
    </message>
    <message>
        <source>&amp;Songs</source>
        <translation>&amp;Songs</translation>
    </message>
    <message>
        <source>&amp;Library</source>
        <translation>&amp;Bibliothek</translation>
    </message>
    <message>
        <source>&amp;Hardware &amp;&amp; Backends</source>
        <translation>&amp;Hardware &amp;&amp; Backends</translation>
    </message>
</context>
<context>
    <name>PoolPanel</name>
    <message>
        <source>Pool members</source>
        <translation>Mitglieder des Pools</translation>
    </message>
</context>
<context>
    <name>SettingsPage</name>
    <message>
        <source>Node token</source>
        <translation>Knoten-Token</translation>
    </message>
</context>
<context>
    <name>SongQueue</name>
    <message>
        <source>Songs you generate show here while they are made.</source>
        <translation>Songs, die Sie erzeugen, erscheinen hier, während sie entstehen.</translation>
    </message>
    <message>
        <source>Song</source>
        <translation>Song</translation>
    </message>
    <message>
        <source>Stage</source>
        <translation>Schritt</translation>
    </message>
    <message>
        <source>Progress</source>
        <translation>Fortschritt</translation>
    </message>
    <message>
        <source>Time left</source>
        <translation>Restzeit</translation>
    </message>
</context>
<context>
    <name>SongsPage</name>
    <message>
        <source>Search songs</source>
        <translation>Songs durchsuchen</translation>
    </message>
    <message>
        <source>★ Favourites</source>
        <translation>★ Favoriten</translation>
    </message>
    <message>
        <source>Songs and takes</source>
        <translation>Songs und Takes</translation>
    </message>
    <message>
        <source>Repaint…</source>
        <translation>Neu malen…</translation>
    </message>
    <message>
        <source>Extend</source>
        <translation>Verlängern</translation>
    </message>
    <message>
        <source>Cover…</source>
        <translation>Cover…</translation>
    </message>
    <message>
        <source>Use as reference</source>
        <translation>Als Referenz</translation>
    </message>
    <message>
        <source>Add a layer…</source>
        <translation>Spur hinzufügen…</translation>
    </message>
    <message>
        <source>Stems…</source>
        <translation>Stems…</translation>
    </message>
    <message>
        <source>Loop</source>
        <translation>Schleife</translation>
    </message>
    <message>
        <source>Match levels</source>
        <translation>Pegel angleichen</translation>
    </message>
    <message>
        <source>Play</source>
        <translation>Abspielen</translation>
    </message>
    <message>
        <source>Play position</source>
        <translation>Wiedergabeposition</translation>
    </message>
    <message>
        <source>Show in folder</source>
        <translation>Im Ordner</translation>
    </message>
    <message>
        <source>Copy path</source>
        <translation>Pfad kopieren</translation>
    </message>
    <message>
        <source>Use these settings</source>
        <translation>Als Vorlage</translation>
    </message>
    <message>
        <source>Rename…</source>
        <translation>Umbenennen…</translation>
    </message>
    <message>
        <source>Export…</source>
        <translation>Exportieren…</translation>
    </message>
    <message>
        <source>Move to trash</source>
        <translation>In den Papierkorb</translation>
    </message>
    <message>
        <source>Loop: on</source>
        <translation>Schleife: an</translation>
    </message>
    <message>
        <source>Pause</source>
        <translation>Pause</translation>
    </message>
</context>
<context>
    <name>StylePicker</name>
    <message>
        <source>Style</source>
        <translation>Stil</translation>
    </message>
    <message>
        <source>Fill the form from a saved style (still editable)</source>
        <translation>Das Formular aus einem gespeicherten Stil füllen (weiter bearbeitbar)</translation>
    </message>
    <message>
        <source>Styles</source>
        <translation>Stile</translation>
    </message>
    <message>
        <source>Style actions</source>
        <translation>Stil-Aktionen</translation>
    </message>
    <message>
        <source>Save the form as a style…</source>
        <translation>Formular als Stil speichern…</translation>
    </message>
    <message>
        <source>Rename this style…</source>
        <translation>Diesen Stil umbenennen…</translation>
    </message>
    <message>
        <source>Remove this style</source>
        <translation>Diesen Stil entfernen</translation>
    </message>
    <message>
        <source>Export this style…</source>
        <translation>Diesen Stil exportieren…</translation>
    </message>
    <message>
        <source>Import a style…</source>
        <translation>Einen Stil importieren…</translation>
    </message>
    <message>
        <source>Save as a style</source>
        <translation>Als Stil speichern</translation>
    </message>
    <message>
        <source>Style name:</source>
        <translation>Name des Stils:</translation>
    </message>
    <message>
        <source>Replace the style?</source>
        <translation>Stil ersetzen?</translation>
    </message>
    <message>
        <source>A style named %1 exists. Replace it with the form?</source>
        <translation>Ein Stil namens %1 existiert bereits. Durch das Formular ersetzen?</translation>
    </message>
    <message>
        <source>Rename the style</source>
        <translation>Stil umbenennen</translation>
    </message>
    <message>
        <source>New name:</source>
        <translation>Neuer Name:</translation>
    </message>
    <message>
        <source>Remove the style?</source>
        <translation>Stil entfernen?</translation>
    </message>
    <message>
        <source>Remove the style %1 and its reference sound? Songs made with it stay.</source>
        <translation>Den Stil %1 und seinen Referenzklang entfernen? Songs, die damit gemacht wurden, bleiben.</translation>
    </message>
    <message>
        <source>Export the style</source>
        <translation>Stil exportieren</translation>
    </message>
    <message>
        <source>Import a style</source>
        <translation>Stil importieren</translation>
    </message>
</context>
<context>
    <name>WaveformEditor</name>
    <message>
        <source>Waveform</source>
        <translation>Wellenform</translation>
    </message>
    <message>
        <source>Drag across the waveform to select a part to repaint; drag past either end to extend the song there. Keys: arrows move the cursor (Ctrl: a tenth of a second), I and O set the in and out points, Shift+arrows select, Esc clears</source>
        <translation>Über die Wellenform ziehen, um einen Teil zum Neu-Malen zu wählen; über ein Ende hinaus ziehen, um den Song dort zu verlängern. Tasten: Pfeile bewegen den Cursor (Strg: um eine Zehntelsekunde), I und O setzen Start- und Endpunkt, Umschalt+Pfeile wählen aus, Esc hebt auf</translation>
    </message>
    <message>
        <source>Drag across the waveform (or press I and O) to select a part to repaint, or past an end to extend</source>
        <translation>Über die Wellenform ziehen (oder I und O drücken), um einen Teil zum Neu-Malen zu wählen, oder über ein Ende hinaus, um zu verlängern</translation>
    </message>
</context>
</TS>
