; Cantor for Windows: Inno Setup 6.6+ script. Runs on Windows only (ISCC.exe).
;
;   packaging\build.sh windows        (Git Bash: builds dist\cantor, then runs ISCC on this)
;   or by hand, after the PyInstaller build:
;   "C:\Program Files (x86)\Inno Setup 6\ISCC.exe" /DAppVersion=0.1.0 installer\windows\cantor.iss
;
; Installs dist\cantor\ (cantor-desktop.exe = the app, cantor.exe = the console CLI, and
; _internal\) into Program Files (or the user's own programs folder when not admin), with a
; Start-menu entry, an optional desktop shortcut and an optional `cantor` on PATH (the
; machine's PATH for an all-users install, the user's for a per-user one). The uninstaller
; removes the program and keeps the user's songs, models and settings unless the user ticks
; "Also delete my songs, models and settings".
;
; Upgrading while Cantor runs: the app holds the mutex named in AppMutex (cantor_desktop/
; procs/windows.py APP_MUTEX), so Setup asks the user to quit it first; Restart Manager
; (CloseApplications) can close its window the way a logout does, which takes the app's own
; quit path (it stops its node, and the node its engines). The node and engines have no
; window, so PrepareToInstall asks the node to stop (`cantor node stop`) and then ends any
; process still running from the install folder. The old _internal folder is removed before
; the new files go in ([InstallDelete]): nothing of an older build is left to be loaded.

#if VER < EncodeVer(6, 6, 0)
  #error Cantor's installer needs Inno Setup 6.6 or newer (CreateCustomForm with a size)
#endif

#ifndef AppVersion
  #define AppVersion "0.1.0"
#endif
#define AppName "Cantor"
#define AppExe "cantor-desktop.exe"
#define Dist "..\..\dist\cantor"

[Setup]
AppId={{6C1E8B0A-3D2F-4A57-9C1B-CA27011D0E11}
AppName={#AppName}
AppVersion={#AppVersion}
AppVerName={#AppName} {#AppVersion}
AppPublisher=Cantor
VersionInfoVersion={#AppVersion}
DefaultDirName={autopf}\{#AppName}
DefaultGroupName={#AppName}
DisableProgramGroupPage=yes
PrivilegesRequired=lowest
PrivilegesRequiredOverridesAllowed=dialog
ArchitecturesAllowed=x64compatible
ArchitecturesInstallIn64BitMode=x64compatible
OutputDir=..\..\dist
OutputBaseFilename=cantor-{#AppVersion}-windows-setup
SetupIconFile=..\..\resources\icons\cantor.ico
UninstallDisplayIcon={app}\{#AppExe}
UninstallDisplayName={#AppName}
Compression=lzma2/max
SolidCompression=yes
WizardStyle=modern
ChangesEnvironment=yes
CloseApplications=yes
RestartApplications=no
AppMutex=CantorDesktopRunning,Global\CantorDesktopRunning

[Languages]
Name: "english"; MessagesFile: "compiler:Default.isl"

[Tasks]
Name: "desktopicon"; Description: "{cm:CreateDesktopIcon}"; GroupDescription: "{cm:AdditionalIcons}"
Name: "addtopath"; Description: "Add the cantor command to PATH (for terminals)"; GroupDescription: "Command line:"; Flags: unchecked

[Files]
Source: "{#Dist}\*"; DestDir: "{app}"; Flags: ignoreversion recursesubdirs createallsubdirs

[InstallDelete]
; files of the build being replaced: a DLL or module the new build no longer ships must not
; stay beside it to be loaded
Type: filesandordirs; Name: "{app}\_internal"

[Icons]
Name: "{autoprograms}\{#AppName}"; Filename: "{app}\{#AppExe}"; WorkingDir: "{app}"
Name: "{autodesktop}\{#AppName}"; Filename: "{app}\{#AppExe}"; WorkingDir: "{app}"; Tasks: desktopicon

[Run]
Filename: "{app}\{#AppExe}"; Description: "{cm:LaunchProgram,{#AppName}}"; Flags: nowait postinstall skipifsilent

[UninstallRun]
; the app, its node and its engine are all this executable: stop them so files can go
Filename: "{sys}\taskkill.exe"; Parameters: "/F /T /IM {#AppExe}"; Flags: runhidden; RunOnceId: "StopCantor"
Filename: "{sys}\taskkill.exe"; Parameters: "/F /T /IM cantor.exe"; Flags: runhidden; RunOnceId: "StopCantorCli"

[UninstallDelete]
Type: filesandordirs; Name: "{app}\_internal"

[Code]
const
  EnvKey = 'Environment';

var
  DeleteUserData: Boolean;

{ --- `cantor` on PATH: the machine's for an all-users install, the user's otherwise --- }

const
  MachineEnvKey = 'SYSTEM\CurrentControlSet\Control\Session Manager\Environment';

function PathRoot(): Integer;
begin
  if IsAdminInstallMode() then
    Result := HKEY_LOCAL_MACHINE
  else
    Result := HKEY_CURRENT_USER;
end;

function PathKey(): String;
begin
  if IsAdminInstallMode() then
    Result := MachineEnvKey
  else
    Result := EnvKey;
end;

function PaddedPath(): String;
var
  Path: String;
begin
  if not RegQueryStringValue(PathRoot(), PathKey(), 'Path', Path) then
    Path := '';
  Result := ';' + Path + ';';
end;

procedure AddToPath(Dir: String);
var
  Path: String;
begin
  if Pos(';' + Uppercase(Dir) + ';', Uppercase(PaddedPath())) > 0 then
    Exit;
  if not RegQueryStringValue(PathRoot(), PathKey(), 'Path', Path) then
    Path := '';
  if (Path <> '') and (Copy(Path, Length(Path), 1) <> ';') then
    Path := Path + ';';
  RegWriteExpandStringValue(PathRoot(), PathKey(), 'Path', Path + Dir);
end;

procedure RemoveFromPath(Dir: String);
var
  Padded: String;
  P: Integer;
begin
  Padded := PaddedPath();
  P := Pos(';' + Uppercase(Dir) + ';', Uppercase(Padded));
  if P = 0 then
    Exit;
  Delete(Padded, P, Length(Dir) + 1);
  RegWriteExpandStringValue(PathRoot(), PathKey(), 'Path',
                            Copy(Padded, 2, Length(Padded) - 2));
end;

procedure CurStepChanged(CurStep: TSetupStep);
begin
  if (CurStep = ssPostInstall) and WizardIsTaskSelected('addtopath') then
    AddToPath(ExpandConstant('{app}'));
end;

{ --- before files are replaced: nothing may run from the install folder --- }

procedure EndProcessesUnder(Dir: String);
var
  ResultCode: Integer;
  Script: String;
begin
  { every process whose executable lives in Dir (the app, a headless node, the CLI), found
    by path: another program's process with the same name is never touched }
  Script := 'Get-CimInstance Win32_Process | Where-Object { $_.ExecutablePath -and ' +
            '$_.ExecutablePath.StartsWith(''' + AddBackslash(Dir) + ''', ' +
            '[StringComparison]::OrdinalIgnoreCase) } | ForEach-Object { ' +
            'Stop-Process -Id $_.ProcessId -Force -ErrorAction SilentlyContinue }';
  Exec(ExpandConstant('{sys}\WindowsPowerShell\v1.0\powershell.exe'),
       '-NoProfile -NonInteractive -ExecutionPolicy Bypass -Command "' + Script + '"',
       '', SW_HIDE, ewWaitUntilTerminated, ResultCode);
end;

function PrepareToInstall(var NeedsRestart: Boolean): String;
var
  ResultCode: Integer;
  Cli: String;
begin
  Result := '';
  Cli := ExpandConstant('{app}\cantor.exe');
  if FileExists(Cli) then
    { as the user who started Setup: their node, found with their token, stops its engines
      and exits (an older build without this command only says so) }
    ExecAsOriginalUser(Cli, 'node stop', '', SW_HIDE, ewWaitUntilTerminated, ResultCode);
  EndProcessesUnder(ExpandConstant('{app}'));
end;

{ --- the uninstaller keeps the user's data unless asked --- }

function InitializeUninstall(): Boolean;
var
  Form: TSetupForm;
  Msg: TNewStaticText;
  Box: TNewCheckBox;
  OkButton, CancelButton: TNewButton;
begin
  Result := True;
  DeleteUserData := False;
  if UninstallSilent() then
    Exit;
  { Inno Setup 6.6+: the size is given here and scaled by CreateCustomForm itself }
  Form := CreateCustomForm(440, 150, False, False);
  try
    Form.Caption := 'Uninstall Cantor';

    Msg := TNewStaticText.Create(Form);
    Msg.Parent := Form;
    Msg.AutoSize := False;
    Msg.WordWrap := True;
    Msg.Left := ScaleX(16);
    Msg.Top := ScaleY(16);
    Msg.Width := Form.ClientWidth - ScaleX(32);
    Msg.Height := ScaleY(44);
    Msg.Caption := 'Cantor will be removed from this computer. Your songs, downloaded ' +
                   'models, engines and settings stay where they are unless you tick the box.';

    Box := TNewCheckBox.Create(Form);
    Box.Parent := Form;
    Box.Left := ScaleX(16);
    Box.Top := ScaleY(68);
    Box.Width := Form.ClientWidth - ScaleX(32);
    Box.Height := ScaleY(20);
    Box.Caption := 'Also delete my songs, models and settings';
    Box.Checked := False;

    OkButton := TNewButton.Create(Form);
    OkButton.Parent := Form;
    OkButton.Caption := 'Uninstall';
    OkButton.ModalResult := mrOk;
    OkButton.Default := True;
    OkButton.Width := ScaleX(90);
    OkButton.Height := ScaleY(26);
    OkButton.Top := Form.ClientHeight - ScaleY(40);
    OkButton.Left := Form.ClientWidth - ScaleX(16 + 90 + 8 + 90);

    CancelButton := TNewButton.Create(Form);
    CancelButton.Parent := Form;
    CancelButton.Caption := 'Cancel';
    CancelButton.ModalResult := mrCancel;
    CancelButton.Cancel := True;
    CancelButton.Width := ScaleX(90);
    CancelButton.Height := ScaleY(26);
    CancelButton.Top := OkButton.Top;
    CancelButton.Left := Form.ClientWidth - ScaleX(16 + 90);

    Form.ActiveControl := OkButton;
    if Form.ShowModal() = mrOk then
      DeleteUserData := Box.Checked
    else
      Result := False;
  finally
    Form.Free();
  end;
end;

procedure CurUninstallStepChanged(CurUninstallStep: TUninstallStep);
begin
  if CurUninstallStep = usUninstall then
    RemoveFromPath(ExpandConstant('{app}'));
  if (CurUninstallStep = usPostUninstall) and DeleteUserData then
  begin
    { platformdirs' folders for "Cantor" (see cantor_desktop/paths.py): settings, engines,
      models, state and logs under %LOCALAPPDATA%\Cantor; songs in Music\Cantor. A songs
      folder moved elsewhere in node.toml is left alone. }
    DelTree(ExpandConstant('{localappdata}\Cantor'), True, True, True);
    DelTree(ExpandConstant('{userappdata}\Cantor'), True, True, True);
    DelTree(GetEnv('USERPROFILE') + '\Music\Cantor', True, True, True);
  end;
end;
